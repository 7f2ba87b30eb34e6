"""Shim for rule freeze_overlay: validate, freeze and bind a generation's candidate overlay."""
from skillbench.overlay import OverlayError
from skillbench.pipeline import freeze_overlay
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0], expected=(OverlayError,)):  # noqa: F821
    freeze_overlay(
        config=snakemake.config,  # noqa: F821
        generation=int(snakemake.wildcards.gen),  # noqa: F821
        source=snakemake.params.source,  # noqa: F821
        frozen_out=snakemake.params.frozen,  # noqa: F821
        overlay_out=snakemake.output.overlay,  # noqa: F821
        candidate_origin=snakemake.params.origin,  # noqa: F821
        proposer_model=snakemake.params.proposer_model,  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        oracle_dirs=list(snakemake.input.oracles),  # noqa: F821
    )
