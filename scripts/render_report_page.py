"""Shim for rule render_report_page: a Markdown report and its figures → one self-contained HTML page."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import render_report_page

with rule_log(snakemake.log[0]):
    render_report_page(
        markdown=snakemake.input.markdown,
        figure_files=list(snakemake.input.figures),
        out=snakemake.output.page,
        title=snakemake.params.title,
    )
