"""Shim for rule render_report_page: a Markdown report and its figures → one self-contained HTML page."""

from skillbench.base.runlog import rule_log
from skillbench.reporting.pages import make_page

with rule_log(snakemake.log[0]):
    make_page(
        markdown=snakemake.input.markdown,
        figures=list(snakemake.input.figures),
        out=snakemake.output.page,
        title=snakemake.params.title,
    )
