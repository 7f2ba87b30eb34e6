"""Shim for rule plot_cell_timeline: each results.jsonl's cell records → the timeline of cells on worker slots."""

from skillbench.base.runlog import rule_log
from skillbench.reporting.figures import make_timeline

with rule_log(snakemake.log[0]):
    make_timeline(
        results=list(snakemake.input.results),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
