"""Shim for rule render_cell_page: a cell's record, transcripts and patch → its page and the author-only page."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import render_cell_page

with rule_log(snakemake.log[0]):
    render_cell_page(
        record=snakemake.input.record,
        patch=snakemake.input.patch,
        arm_order=list(snakemake.params.arms),
        page_out=snakemake.output.page,
        author_out=snakemake.output.author,
    )
