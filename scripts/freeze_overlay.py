"""Shim for rule freeze_overlay: validate, freeze and bind a generation's candidate overlay."""

from skillbench.base.runlog import rule_log
from skillbench.steps.evolve import freeze_overlay

with rule_log(snakemake.log[0]):
    freeze_overlay(
        generation=int(snakemake.wildcards.gen),
        source=snakemake.params.source,
        frozen_out=snakemake.params.frozen,
        overlay_out=snakemake.output.overlay,
        diff_out=snakemake.output.diff,
        candidate_origin=snakemake.params.origin,
        proposer_model=snakemake.params.proposer_model,
        bindings=snakemake.input.bindings,
        oracle_dirs=list(snakemake.input.oracles),
        skills=dict(snakemake.params.skills),
        candidate_arms=list(snakemake.params.arms),
        arm_skills=dict(snakemake.params.arm_skills),
        task_tools=list(snakemake.params.task_tools),
    )
