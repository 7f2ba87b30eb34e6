"""Shim for rule check_task: setup, verify and the hidden oracle on the base (and on the reference solution)."""
from skillbench.pipeline import api_key, check_task
from skillbench.process import install_signal_handlers, watch_parent
from skillbench.runlog import rule_log
from skillbench.taskcheck import TaskCheckError

install_signal_handlers()
watch_parent()
config = snakemake.config  # noqa: F821
with rule_log(snakemake.log[0], secrets=[key for key in [api_key(config)] if key],  # noqa: F821
              expected=(TaskCheckError,)):
    check_task(
        config=config,
        task=dict(snakemake.params.task),  # noqa: F821
        suite=snakemake.params.suite,  # noqa: F821
        binding=snakemake.input.binding,  # noqa: F821
        template=snakemake.input.template,  # noqa: F821
        oracle_snapshot=snakemake.input.oracle,  # noqa: F821
        out=snakemake.output.check,  # noqa: F821
    )
