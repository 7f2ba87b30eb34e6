"""Shim for rule collect_results: cell records → results.jsonl in canonical order."""

from skillbench.base.runlog import rule_log
from skillbench.steps.sweep import collect_results

with rule_log(snakemake.log[0]):
    collect_results(
        records=list(snakemake.input.records),
        bindings=snakemake.input.bindings,
        arm_order=list(snakemake.params.arms),
        out=snakemake.output.results,
        design=snakemake.params.design,
        schedules=list(snakemake.input.schedules),
    )
