"""Shim for rule plot_run_figures: the cells behind each results.jsonl, proposer sessions → spend and timeline."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_run_figures

with rule_log(snakemake.log[0]):
    plot_run_figures(
        results=list(snakemake.input.results),
        proposer_sessions=list(snakemake.input.proposer_sessions),
        arm_order=list(snakemake.params.arms),
        spend_title=snakemake.params.spend_title,
        timeline_title=snakemake.params.timeline_title,
        spend_out=snakemake.output.spend,
        timeline_out=snakemake.output.timeline,
    )
