"""Shim for rule render_report_page: a Markdown report and its figures → one self-contained HTML page."""
from skillbench.pages import make_page
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    make_page(
        markdown=snakemake.input.markdown,  # noqa: F821
        figures=list(snakemake.input.figures),  # noqa: F821
        out=snakemake.output.page,  # noqa: F821
        title=snakemake.params.title,  # noqa: F821
    )
