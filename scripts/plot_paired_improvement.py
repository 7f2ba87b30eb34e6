"""Shim for rule plot_paired_improvement: promotion.json → the forest plot of one candidate pair."""

from skillbench.base.runlog import rule_log
from skillbench.steps.report import plot_paired_improvement

with rule_log(snakemake.log[0]):
    plot_paired_improvement(
        promotion=snakemake.input.promotion,
        candidate_arm=snakemake.wildcards.candidate,
        out=snakemake.output.figure,
    )
