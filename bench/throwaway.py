"""A throwaway copy of the project for the benches: the files a run reads, committed, with the project's agent
CLIs linked in, and an environment whose jobs import the copy's library (not the editable install's live tree,
which may change while a bench runs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("Snakefile", "workflow", "scripts", "schemas", "config", "profiles", "tasks", "mcp", ".claude")
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def copy_project(root: Path) -> None:
    """The copy at ``root``, a git repository with one commit (candidates are bound to the skills at HEAD)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    (root / "tools").symlink_to(REPO / "tools")
    # Compiled once here, as the first run of an installed project leaves it: no job of the bench pays for it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "scripts")], check=True, capture_output=True)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", "-C", str(root)]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bench"]):
        subprocess.run([*git, *command], check=True, capture_output=True)


def job_environment(root: Path) -> dict[str, str]:
    """The environment for snakemake in the copy: its jobs import the copy's library first, with bytecode
    written as a user's machine writes it (this workplace's shell sets PYTHONDONTWRITEBYTECODE)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = os.pathsep.join([str(root / "scripts"), *filter(None, [os.environ.get("PYTHONPATH")])])
    return environment


def run_snakemake(root: Path, args: list[str]) -> float:
    """Seconds `snakemake ARGS` took in the copy at ``root``; a failed run stops the bench with its stderr's tail."""
    started = time.monotonic()
    done = subprocess.run([SNAKEMAKE, *args], cwd=root, env=job_environment(root), capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed in {root}:\n{done.stderr[-4000:]}")
    return wall
