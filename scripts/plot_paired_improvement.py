"""Shim for rule plot_paired_improvement: promotion.json → the forest plot of one candidate pair."""

from skillbench.base.runlog import rule_log
from skillbench.reporting.figures import make_forest

with rule_log(snakemake.log[0]):
    make_forest(
        promotion=snakemake.input.promotion,
        candidate_arm=snakemake.wildcards.candidate,
        out=snakemake.output.figure,
    )
