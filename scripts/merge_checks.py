"""Shim for rule merge_checks: one checks.json in suite order, once every selected task passed its check."""

from skillbench.base.runlog import rule_log
from skillbench.steps.tasks import merge_checks

with rule_log(snakemake.log[0]):
    merge_checks(
        suite=snakemake.params.suite,
        check_paths=list(snakemake.input.checks),
        out=snakemake.output.checks,
    )
