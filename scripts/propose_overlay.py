"""Shim for rule propose_overlay: one proposer session writes the generation's candidate overlay."""
import sys

from skillbench.pipeline import api_key, propose_overlay
from skillbench.process import install_signal_handlers, watch_parent
from skillbench.proposer import ProposerError
from skillbench.runlog import rule_log

install_signal_handlers()
watch_parent()
config = snakemake.config  # noqa: F821
with rule_log(snakemake.log[0], secrets=[key for key in [api_key(config)] if key],  # noqa: F821
              expected=(ProposerError,)):
    propose_overlay(
        config=config,
        generation=int(snakemake.wildcards.gen),  # noqa: F821
        evidence_dir=snakemake.input.evidence,  # noqa: F821
        model_script=snakemake.input.get("model_script") or None,  # noqa: F821
        proposal_out=snakemake.output.proposal,  # noqa: F821
        session_out=snakemake.output.session,  # noqa: F821
        prompt_out=snakemake.output.prompt,  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        oracle_dirs=list(snakemake.input.oracles),  # noqa: F821
        log=sys.stdout,
    )
