"""Shim for rule plot_generation_chain: summary.json + each generation's promotion.json → the chain figure."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_generation_chain

with rule_log(snakemake.log[0]):
    plot_generation_chain(
        summary=snakemake.input.summary,
        promotions=list(snakemake.input.promotions),
        out=snakemake.output.figure,
    )
