"""Shim for rule check_task: setup, verify and the hidden oracle on the base (and on the reference solution)."""

from skillbench.pipeline import api_key, check_task
from skillbench.process import install_signal_handlers, watch_parent
from skillbench.runlog import rule_log
from skillbench.taskcheck import TaskCheckError

install_signal_handlers()
watch_parent()
config = snakemake.config
with rule_log(snakemake.log[0], secrets=[key for key in [api_key(config)] if key], expected=(TaskCheckError,)):
    check_task(
        config=config,
        task=dict(snakemake.params.task),
        suite=snakemake.params.suite,
        binding=snakemake.input.binding,
        template=snakemake.input.template,
        oracle_snapshot=snakemake.input.oracle,
        out=snakemake.output.check,
    )
