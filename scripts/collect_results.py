"""Shim for rule collect_results: cell records → results.jsonl in canonical order."""
from skillbench.pipeline import collect_results
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    collect_results(
        records=list(snakemake.input.records),  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        arm_order=list(snakemake.params.arms),  # noqa: F821
        out=snakemake.output.results,  # noqa: F821
    )
