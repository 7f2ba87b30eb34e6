"""Shim for rule bind_task: bind one task (resolved commit, sanitized template, oracle snapshot)."""

from skillbench.pipeline import bind_task
from skillbench.runlog import rule_log
from skillbench.tasks import TaskError

with rule_log(snakemake.log[0], expected=(TaskError,)):
    bind_task(
        suite=snakemake.params.suite,
        task=dict(snakemake.params.task),
        binding_out=snakemake.output.binding,
        template_out=snakemake.output.template,
        oracle_out=snakemake.output.oracle,
    )
