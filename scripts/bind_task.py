"""Shim for rule bind_task: bind one task (resolved commit, sanitized template, oracle snapshot)."""

from skillbench.base.runlog import rule_log
from skillbench.steps.tasks import bind_task

with rule_log(snakemake.log[0]):
    bind_task(
        suite=snakemake.params.suite,
        task=dict(snakemake.params.task),
        binding_out=snakemake.output.binding,
        template_out=snakemake.output.template,
        oracle_out=snakemake.output.oracle,
    )
