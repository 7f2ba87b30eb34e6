"""Shim for rule merge_bindings: one bindings.json in suite order, with the skipped expensive tasks."""
from skillbench.pipeline import merge_bindings
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    merge_bindings(
        suite=snakemake.config["tasks"]["suite"],  # noqa: F821
        binding_paths=list(snakemake.input.bindings),  # noqa: F821
        skipped_expensive=list(snakemake.params.skipped_expensive),  # noqa: F821
        out=snakemake.output.bindings,  # noqa: F821
    )
