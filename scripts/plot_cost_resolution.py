"""Shim for rule plot_cost_resolution: results.jsonl → cost against resolution per arm, one facet per task."""
from skillbench.figures import make_cost_resolution
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    make_cost_resolution(
        results=snakemake.input.results,  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        arm_order=list(snakemake.params.arms),  # noqa: F821
        title=snakemake.params.title,  # noqa: F821
        out=snakemake.output.figure,  # noqa: F821
    )
