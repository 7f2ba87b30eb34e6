"""Shim for rule plot_cell_timeline: each results.jsonl's cell records → the timeline of cells on worker slots."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_cell_timeline

with rule_log(snakemake.log[0]):
    plot_cell_timeline(
        results=list(snakemake.input.results),
        arm_order=list(snakemake.params.arms),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
