"""Shim for rule merge_bindings: one bindings.json in suite order, with the skipped expensive tasks."""

from skillbench.base.runlog import rule_log
from skillbench.steps.tasks import merge_bindings

with rule_log(snakemake.log[0]):
    merge_bindings(
        suite=snakemake.params.suite,
        binding_paths=list(snakemake.input.bindings),
        skipped_expensive=list(snakemake.params.skipped_expensive),
        out=snakemake.output.bindings,
    )
