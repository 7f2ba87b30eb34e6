"""Shim for rule plot_paired_improvement: promotion.json → the forest plot of one candidate pair."""
from skillbench.figures import make_forest
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    make_forest(
        promotion=snakemake.input.promotion,  # noqa: F821
        candidate_arm=snakemake.wildcards.candidate,  # noqa: F821
        out=snakemake.output.figure,  # noqa: F821
    )
