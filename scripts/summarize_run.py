"""Shim for rule summarize_run: the chain of generations and the outcome; fails on broken incumbents."""

from skillbench.base.runlog import rule_log
from skillbench.steps.evolve import summarize_run

with rule_log(snakemake.log[0]):
    summarize_run(
        experiment=snakemake.params.experiment,
        generations_requested=snakemake.params.generations,
        arms=list(snakemake.params.arms),
        runs=snakemake.params.runs,
        min_runs=snakemake.params.min_runs,
        results=list(snakemake.input.results),
        promotions=list(snakemake.input.get("promotions", [])),
        overlays=list(snakemake.input.get("overlays", [])),
        summary_out=snakemake.output.summary,
        markdown_out=snakemake.output.markdown,
    )
