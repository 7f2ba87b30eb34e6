"""Shim for rule propose_overlay: one proposer session writes the generation's candidate overlay."""

import sys

from skillbench.base.runlog import rule_log
from skillbench.execution.environment import secrets
from skillbench.steps.evolve import propose_overlay

settings = dict(snakemake.params.settings)
with rule_log(snakemake.log[0], secrets=secrets(settings["model"]["api_key_env"])):
    propose_overlay(
        settings=settings,
        run_control=dict(snakemake.resources),
        generation=int(snakemake.wildcards.gen),
        evidence_dir=snakemake.input.evidence,
        model_script=snakemake.input.get("model_script") or None,
        overlay_out=snakemake.params.overlay,
        proposal_out=snakemake.output.proposal,
        session_out=snakemake.output.session,
        prompt_out=snakemake.output.prompt,
        bindings=snakemake.input.bindings,
        oracle_dirs=list(snakemake.input.oracles),
        log=sys.stdout,
    )
