"""The `skillbench-slurm` executor: snakemake-executor-plugin-slurm, tuned for batches of short cells.

It submits, watches and cancels exactly as the SLURM plugin does (every `--skillbench-slurm-*` setting is the
plugin's `--slurm-*` one), with two differences that matter when a cluster job is a few seconds of work:

- Inside a cluster job, the job's snakemake runs its jobs (a batch of cells) itself, as `--cores` would
  locally. The SLURM plugin hands each one to `srun` and a second snakemake, which starts, parses the workflow
  and builds its graph again: about two seconds per cell before the cell's own work starts.
- A batch runs as many of its cells at once as the agent sessions it holds. Snakemake gives a batch a share of
  the global session cap (`--resources agent_sessions=N`) for the cells it can run side by side; the SLURM
  plugin runs a batch one job at a time whatever its share, which left the rest of that share idle.
- Status checks are at most `max-seconds-between-status-checks` apart. The plugin waits ten seconds longer
  after every check that finds nothing finished (up to three minutes), so a batch that ends a while after its
  submission is noticed up to that gap late, and everything after it waits as long.

Snakemake finds executor plugins by their module name, hence this package's.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from snakemake_executor_plugin_slurm import Executor as SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as SlurmExecutorSettings
from snakemake_executor_plugin_slurm import common_settings
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

__all__ = ["Executor", "ExecutorSettings", "common_settings"]

# What the SLURM plugin passes to the snakemake inside a cluster job: run its jobs through srun, one at a time.
JOBSTEP_EXECUTOR_ARGS = "--executor slurm-jobstep"
ONE_AT_A_TIME_ARGS = "--jobs 1"
# The resource every agent-session rule claims one of (workflow/rules); the cap on it is global.
SESSION_RESOURCE = "agent_sessions"


@dataclass
class ExecutorSettings(SlurmExecutorSettings):
    # Snakemake builds the command-line flag from this annotation at run time and needs Optional[...] for it.
    max_seconds_between_status_checks: Optional[int] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "The longest wait, in seconds, between two checks of the submitted jobs' status (the SLURM "
            "plugin lengthens it by 10 s after every check that finds no job finished, up to 180 s). Unset: "
            "the plugin's own rule.",
            "env_var": False,
            "required": False,
        },
    )


class Executor(SlurmExecutor):
    def additional_general_args(self) -> str:
        general_args: str = super().additional_general_args()
        for expected in (JOBSTEP_EXECUTOR_ARGS, ONE_AT_A_TIME_ARGS):
            if expected not in general_args:
                raise RuntimeError(
                    f"snakemake-executor-plugin-slurm no longer passes {expected!r} to a cluster job's snakemake "
                    f"({general_args!r}); the skillbench-slurm executor needs updating for it"
                )
        return general_args.replace(JOBSTEP_EXECUTOR_ARGS, "--executor local")

    def format_job_exec(self, job: JobExecutorInterface) -> str:
        command: str = super().format_job_exec(job)
        return command.replace(ONE_AT_A_TIME_ARGS, f"--jobs {jobs_at_once(job.resources)}")

    # The base class's getter, this setter.
    @SlurmExecutor.next_seconds_between_status_checks.setter
    def next_seconds_between_status_checks(self, seconds: int | None) -> None:
        longest = self.workflow.executor_settings.max_seconds_between_status_checks
        if seconds is not None and longest is not None:
            seconds = min(seconds, longest)
        self._next_seconds_between_status_checks = seconds


def jobs_at_once(resources: Mapping[str, object]) -> int:
    """How many jobs of a cluster job run at once: as many agent sessions as it holds, at least one."""
    held = resources.get(SESSION_RESOURCE)
    return held if isinstance(held, int) and held > 1 else 1
