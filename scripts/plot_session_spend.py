"""Shim for rule plot_session_spend: the cells behind each results.jsonl, proposer sessions → cost, turns by role."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_session_spend

with rule_log(snakemake.log[0]):
    plot_session_spend(
        results=list(snakemake.input.results),
        proposer_sessions=list(snakemake.input.proposer_sessions),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
