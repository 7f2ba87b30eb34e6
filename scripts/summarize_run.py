"""Shim for rule summarize_run: the chain of generations and the outcome; fails on broken incumbents."""
from skillbench.pipeline import HarnessHealthError, summarize_run
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0], expected=(HarnessHealthError,)):  # noqa: F821
    summarize_run(
        config=snakemake.config,  # noqa: F821
        results=list(snakemake.input.results),  # noqa: F821
        promotions=list(snakemake.input.get("promotions", [])),  # noqa: F821
        overlays=list(snakemake.input.get("overlays", [])),  # noqa: F821
        summary_out=snakemake.output.summary,  # noqa: F821
        markdown_out=snakemake.output.markdown,  # noqa: F821
    )
