"""Shim for rule plot_session_spend: the cells behind each results.jsonl, proposer sessions → cost, turns by role."""

from skillbench.base.runlog import rule_log
from skillbench.reporting.figures import make_spend

with rule_log(snakemake.log[0]):
    make_spend(
        results=list(snakemake.input.results),
        proposer_sessions=list(snakemake.input.proposer_sessions),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
