"""Shim for rule render_report: results.jsonl → report.md."""

from skillbench.base.runlog import rule_log
from skillbench.steps.sweep import render_report

with rule_log(snakemake.log[0]):
    render_report(
        results=snakemake.input.results,
        bindings=snakemake.input.bindings,
        model=dict(snakemake.params.model),
        runs=snakemake.params.runs,
        tools=list(snakemake.params.tools),
        baseline_arm=snakemake.params.baseline,
        baseline_arms=dict(snakemake.params.baseline_arms),
        arm_order=list(snakemake.params.arms),
        promotion=snakemake.input.get("promotion"),
        candidate_diff=snakemake.input.get("diff"),
        sweep=snakemake.input.get("sweep"),
        out=snakemake.output.report,
    )
