"""Shim for rule plot_generation_chain: summary.json + each generation's promotion.json → the chain figure."""
from skillbench.figures import make_generation_chain
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    make_generation_chain(
        summary=snakemake.input.summary,  # noqa: F821
        promotions=list(snakemake.input.promotions),  # noqa: F821
        out=snakemake.output.figure,  # noqa: F821
    )
