"""Shim for rule render_cell_pages: every cell of one cell folder → its page and its author-only page."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import render_cell_pages

with rule_log(snakemake.log[0]):
    render_cell_pages(
        records=list(snakemake.input.records),
        arm_order=list(snakemake.params.arms),
        pages_out=snakemake.output.pages,
        authors_out=snakemake.output.authors,
    )
