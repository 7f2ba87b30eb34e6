"""Helpers for workflow tests that run snakemake against a real single-node SLURM.

`.ci/slurm` does the work (install if missing, configure, start, stop); this module only
wraps it for pytest and reads back which jobs SLURM saw.

    from slurm_fixture import slurm_cluster, slurm_job_history, slurm_unavailable

    def test_cells_on_slurm(tmp_path):
        if reason := slurm_unavailable():
            pytest.skip(reason)
        with slurm_cluster(tmp_path / "slurm") as state_dir:
            run snakemake --profile profiles/slurm --directory <workdir> ...
            jobs = slurm_job_history(state_dir, workdir=<workdir>)
            assert {j["rule"] for j in jobs} >= {"run_cell"}

Read the history *inside* the `with` block: only `squeue` (needs the running controller)
knows each job's comment, and the rule name is only in the comment. After `down`, the
jobcomp file still lists every finished job, but with `rule` = None.

Test modules in tests/workflow/ import this as `slurm_fixture` (pytest puts their folder
on sys.path); it is deliberately not named test_* so pytest does not collect it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "slurm"

# `up` may run apt-get on a fresh machine (~5 s here, more on a slow mirror); the daemons
# themselves are ready in about a second.
UP_TIMEOUT_S = 600
DOWN_TIMEOUT_S = 120

# squeue fields: id, name, state, workdir, submit, start, end, comment. The comment goes
# last so a '|' inside it cannot shift the other fields.
_SQUEUE_FORMAT = "%i|%j|%T|%Z|%V|%S|%e|%k"
_SQUEUE_KEYS = ("job_id", "name", "state", "workdir", "submit_time", "start_time", "end_time", "comment")


def slurm_unavailable() -> str | None:
    """Why a real SLURM cannot be started here (a skip reason), or None if it can."""
    if not sys.platform.startswith("linux"):
        return "SLURM tests need Linux"
    if os.geteuid() != 0:
        return ".ci/slurm needs root (installs packages, writes /etc/slurm/slurm.conf)"
    has_binaries = all(shutil.which(b) for b in ("slurmctld", "slurmd", "sbatch", "munged"))
    if not has_binaries and not shutil.which("apt-get"):
        return "SLURM is not installed and apt-get is not available to install it"
    return None


def _run_script(action: str, state_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), action, str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def slurm_cluster(state_dir: os.PathLike[str] | str) -> Iterator[Path]:
    """Start the single-node cluster for the duration of the block; yield STATE_DIR.

    `.ci/slurm down` runs on every exit path (also when `up` itself fails half-way), so no
    daemon outlives the test. A failed `up` raises RuntimeError with the script's output,
    which includes the tails of the daemon logs.
    """
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    try:
        up = _run_script("up", state, UP_TIMEOUT_S)
        if up.returncode != 0:
            raise RuntimeError(f".ci/slurm up failed (exit {up.returncode}):\n{up.stdout}{up.stderr}")
        yield state
    finally:
        down = _run_script("down", state, DOWN_TIMEOUT_S)
        if down.returncode != 0 and sys.exc_info()[0] is None:
            raise RuntimeError(f".ci/slurm down failed (exit {down.returncode}):\n{down.stdout}{down.stderr}")


def _rule_and_wildcards(comment: str | None) -> tuple[str | None, str | None]:
    """The plugin comments each job `rule_<rule>` or `rule_<rule>_wildcards_<values>`."""
    if not comment or not comment.startswith("rule_"):
        return None, None
    rule, sep, wildcards = comment[len("rule_") :].partition("_wildcards_")
    return rule, (wildcards if sep else None)


def _none_if_unset(value: str) -> str | None:
    return None if value in ("", "(null)", "N/A", "Unknown", "None") else value


def _from_squeue() -> dict[int, dict]:
    try:
        out = subprocess.run(
            ["squeue", "--states=all", "--noheader", f"--format={_SQUEUE_FORMAT}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}  # controller down (e.g. after `down`): fall back to the jobcomp file
    jobs: dict[int, dict] = {}
    for line in out.splitlines():
        fields = line.split("|", len(_SQUEUE_KEYS) - 1)
        if len(fields) != len(_SQUEUE_KEYS) or not fields[0].isdigit():
            continue
        job = {k: _none_if_unset(v.strip()) for k, v in zip(_SQUEUE_KEYS, fields, strict=True)}
        job["job_id"] = int(fields[0])
        job["exit_code"] = None
        job["source"] = "squeue"
        jobs[job["job_id"]] = job
    return jobs


def _from_jobcomp(path: Path) -> dict[int, dict]:
    """Parse slurm's jobcomp/filetxt lines: `JobId=3 UserId=root(0) ... Name=<uuid> ...`."""
    jobs: dict[int, dict] = {}
    if not path.is_file():
        return jobs
    keys = {
        "Name": "name",
        "JobState": "state",
        "WorkDir": "workdir",
        "SubmitTime": "submit_time",
        "StartTime": "start_time",
        "EndTime": "end_time",
        "ExitCode": "exit_code",
    }
    for line in path.read_text(errors="replace").splitlines():
        # Values have no spaces in what we read (names are run uuids, paths are ours).
        pairs = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if not pairs.get("JobId", "").isdigit():
            continue
        job = {"job_id": int(pairs["JobId"]), "comment": None, "source": "jobcomp"}
        job.update({new: _none_if_unset(pairs.get(old, "")) for old, new in keys.items()})
        jobs[job["job_id"]] = job
    return jobs


def slurm_job_history(state_dir: os.PathLike[str] | str, workdir: os.PathLike[str] | str | None = None) -> list[dict]:
    """Every job this cluster has seen, oldest first, one dict per SLURM job.

    Keys: job_id (int), name (the snakemake run uuid for plugin jobs), comment, rule and
    wildcards (parsed from the comment; wildcard values joined by "_"; None when unknown), state (COMPLETED, FAILED,
    CANCELLED, RUNNING, ...), workdir, submit_time, start_time, end_time (ISO strings),
    exit_code ("0:0", jobcomp only) and source ("squeue" or "jobcomp").

    squeue (while the controller runs) covers jobs finished less than MinJobAge (600 s)
    ago and gives comments; the jobcomp file of STATE_DIR covers every finished job, even
    after `down`. Pass `workdir` to keep only jobs submitted for that snakemake --directory.
    """
    merged = _from_jobcomp(Path(state_dir).resolve() / "jobcomp.txt")
    for job_id, job in _from_squeue().items():
        if job_id in merged:
            # squeue knows the comment, jobcomp the exit code: keep both
            job["exit_code"] = merged[job_id]["exit_code"]
        merged[job_id] = job
    history = []
    for job in sorted(merged.values(), key=lambda j: j["job_id"]):
        job["rule"], job["wildcards"] = _rule_and_wildcards(job["comment"])
        history.append(job)
    if workdir is not None:
        wanted = os.path.realpath(workdir)
        history = [j for j in history if j["workdir"] and os.path.realpath(j["workdir"]) == wanted]
    return history
