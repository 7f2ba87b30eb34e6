"""Shim for rule merge_bindings: one bindings.json in suite order, with the skipped expensive tasks."""

from skillbench.pipeline import merge_bindings
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):
    merge_bindings(
        suite=snakemake.params.suite,
        binding_paths=list(snakemake.input.bindings),
        skipped_expensive=list(snakemake.params.skipped_expensive),
        out=snakemake.output.bindings,
    )
