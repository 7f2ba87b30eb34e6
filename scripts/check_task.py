"""Shim for rule check_task: setup, verify and the hidden oracle on the base (and on the reference solution)."""

from skillbench.base.runlog import rule_log
from skillbench.execution.environment import secrets
from skillbench.steps.tasks import check_task

params = snakemake.params
with rule_log(snakemake.log[0], secrets=secrets(params.api_key_env)):
    check_task(
        settings=dict(params.settings),
        api_key_env=params.api_key_env,
        task=dict(params.task),
        suite=params.suite,
        binding=snakemake.input.binding,
        template=snakemake.input.template,
        oracle_snapshot=snakemake.input.oracle,
        out=snakemake.output.check,
    )
