"""Shim for rule plot_cost_resolution: results.jsonl → cost against resolution per arm, one facet per task."""

from skillbench.figures import make_cost_resolution
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):
    make_cost_resolution(
        results=snakemake.input.results,
        bindings=snakemake.input.bindings,
        arm_order=list(snakemake.params.arms),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
