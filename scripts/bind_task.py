"""Shim for rule bind_task: bind one task (resolved commit, sanitized template, oracle snapshot)."""

from skillbench.pipeline import bind_task
from skillbench.runlog import rule_log
from skillbench.tasks import TaskError

with rule_log(snakemake.log[0], expected=(TaskError,)):  # noqa: F821
    bind_task(
        suite=snakemake.params.suite,  # noqa: F821
        task=dict(snakemake.params.task),  # noqa: F821
        binding_out=snakemake.output.binding,  # noqa: F821
        template_out=snakemake.output.template,  # noqa: F821
        oracle_out=snakemake.output.oracle,  # noqa: F821
    )
