"""Shim for rule plot_session_spend: the cells behind each results.jsonl, proposer sessions → cost, turns by role."""
from skillbench.figures import make_spend
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    make_spend(
        results=list(snakemake.input.results),  # noqa: F821
        proposer_sessions=list(snakemake.input.proposer_sessions),  # noqa: F821
        title=snakemake.params.title,  # noqa: F821
        out=snakemake.output.figure,  # noqa: F821
    )
