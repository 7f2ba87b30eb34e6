"""Shim for rule plot_session_spend: the cells behind each results.jsonl, proposer sessions → cost, turns by role."""

from skillbench.figures import make_spend
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):
    make_spend(
        results=list(snakemake.input.results),
        proposer_sessions=list(snakemake.input.proposer_sessions),
        title=snakemake.params.title,
        out=snakemake.output.figure,
    )
