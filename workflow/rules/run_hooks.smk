# The run's start and end: the Bubblewrap preflight, the outage-breaker reset, Ctrl-C handling and the progress
# plan before the first job; the closing lines after the last. Snakemake runs only the top-level Snakefile's
# onstart/onsuccess/onerror and drops a module's, so `onstart:` here would be lost when this workflow is used as a
# module (`module skillbench: ...; use rule * from skillbench`). The handlers are therefore added to the top-level
# workflow's, whichever Snakefile includes this file, after any the consumer defined before its `use rule`.
# Snakemake (9.27) offers no public call for that, so its private _onstart/_onsuccess/_onerror are wrapped; a
# Snakemake without them is refused rather than run without the preflight.
import logging  # noqa: E402
import os  # noqa: E402

from snakemake.exceptions import WorkflowError  # noqa: E402
from snakemake_interface_logger_plugins.common import LogEvent  # noqa: E402


def record_run():
    """run.json: the config files and values, the command line and the process this run was started with, so
    every command that takes its results folder acts on this experiment."""
    command_line = [str(path) for path in workflow.config_settings.configfiles]
    given = {os.path.abspath(path) for path in command_line}
    sb_runrecord.record_run(
        RESULTS,
        config=config,
        snakefile_files=[str(path) for path in workflow.configfiles if os.path.abspath(path) not in given],
        command_line_files=command_line,
        overrides=dict(workflow.config_settings.config),
        argv=list(sys.argv),
        env_profile=os.environ.get("SNAKEMAKE_PROFILE"),
        snakefile=str(workflow.main_snakefile),
        secrets=list(sb_environment.secrets(config["model"]["api_key_env"])),
        price_table=sb_preflight.price_provenance(config),
    )


def start_run():
    """In the snakemake process, once per real run (not a dry-run, not when nothing is to be done), after the
    scheduler took the lock and installed its own SIGTERM handler, before any job."""
    prepare_run()
    record_run()
    write_progress_plan()


def chain_run_hook(name, ours, after=None):
    """Run `ours(log)`, then the handler the top-level workflow already had (the consumer's, or Snakemake's no-op),
    then `after(log)`."""
    previous = getattr(workflow, name, None)
    if not callable(previous):
        raise WorkflowError(
            f"this Snakemake has no workflow.{name}: skillbench cannot register its preflight (Bubblewrap check, "
            "breaker reset, Ctrl-C handling), so it refuses to run"
        )

    def hook(log):
        ours(log)
        previous(log)
        if after is not None:
            after(log)

    setattr(workflow, name, hook)


def end_interrupted_run(log):
    """A Ctrl-C'd run ends with skillbench's lines: Snakemake would add `WorkflowError: At least one job did not
    complete successfully` after them. Leaving here (SystemExit passes Snakemake's `except Exception`) still runs
    its cleanup on the way out: the lock is released, and the exit status is a Ctrl-C's."""
    if sb_process.INTERRUPTED.is_set():
        raise SystemExit(130)


class ShortFinalReason(logging.Filter):
    """Snakemake prints a `Reason:` under the `message:` of `rule all` (unless every job's reason is muted with
    `--quiet reason`): for the last job of a run, "Input files updated by another job: " and every report and
    record path. That job's reason is always the same, so it becomes one short phrase."""

    def filter(self, record):
        if getattr(record, "event", None) == LogEvent.JOB_INFO and getattr(record, "rule_name", None) == "all":
            record.reason = "the run's outputs were made or updated"
        return True


logging.getLogger("snakemake.logging").addFilter(ShortFinalReason())
# After a Ctrl-C, Snakemake's scheduler says it will exit after the running jobs each time one of them ends: once.
logging.getLogger("snakemake.logging").addFilter(sb_process.SaidOnce(sb_process.SNAKEMAKE_DRAIN_LINE))
chain_run_hook("_onstart", lambda log: start_run())
chain_run_hook("_onsuccess", lambda log: announce_run_end(ok=True))
chain_run_hook(
    "_onerror",
    lambda log: announce_run_end(ok=False, log=", ".join(map(str, log)) if isinstance(log, list) else log),
    after=end_interrupted_run,
)
