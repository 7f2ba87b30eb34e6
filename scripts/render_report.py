"""Shim for rule render_report: results.jsonl → report.md."""
from skillbench.pipeline import render_report
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    render_report(
        results=snakemake.input.results,  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        config=snakemake.config,  # noqa: F821
        arm_order=list(snakemake.params.arms),  # noqa: F821
        promotion=snakemake.input.get("promotion"),  # noqa: F821
        out=snakemake.output.report,  # noqa: F821
    )
