"""Shim for rule plot_cost_resolution: results.jsonl → cost against resolution per arm, one facet per task."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_cost_resolution

with rule_log(snakemake.log[0]):
    plot_cost_resolution(
        results=snakemake.input.results,
        bindings=snakemake.input.bindings,
        arm_order=list(snakemake.params.arms),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
