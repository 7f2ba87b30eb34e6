"""What defines a run: ``results/<experiment>/run.json``, written by the run's start hook.

It holds the config files the run was started with (as named, resolved, digested), the ``--config`` values, the
resolved config, the snakemake command line as typed (redacted) and the options of it that choose the workflow and
its config, the profile, skillbench's version and commit, and the snakemake process. Every ``skillbench`` command
that takes a results folder reads the experiment's config from it (``experiment_config``), the commands a run
prints carry its options (``snakemake_command``), and a second run of the same experiment is refused while the
first one lives (``busy_message``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, cast

from skillbench.base import artifacts, layout
from skillbench.base.process import is_running, start_ticks
from skillbench.base.records import RunConfigFile, RunPriceTable, RunRecord
from skillbench.base.redaction import redact_text
from skillbench.experiment import configcheck

KIND = "run"
DEFAULT_CONFIG = Path("config/config.yaml")
# Options of a snakemake command line that choose the workflow and its config: a printed command keeps them, so it
# acts on the same experiment. The first group takes one value, the second all values up to the next option.
ONE_VALUE_OPTIONS = frozenset({"--snakefile", "-s", "--directory", "-d", "--profile", "--workflow-profile"})
MANY_VALUE_OPTIONS = frozenset({"--configfile", "--configfiles", "--config", "-C"})
CHECKOUT = Path(__file__).resolve().parents[3]


def workflow_options(argv: list[str]) -> list[str]:
    """The tokens of a snakemake command line (without the program) that choose the workflow and its config."""
    kept: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        flag, equals, _value = token.partition("=")
        if equals and flag in ONE_VALUE_OPTIONS | MANY_VALUE_OPTIONS:
            kept.append(token)
            index += 1
        elif token in ONE_VALUE_OPTIONS:
            kept += argv[index : index + 2]
            index += 2
        elif token in MANY_VALUE_OPTIONS:
            end = index + 1
            # argparse's nargs: values run up to the next option.
            while end < len(argv) and not argv[end].startswith("-"):
                end += 1
            kept += argv[index:end]
            index = end
        else:
            index += 1
    return kept


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _given_name(path: str, options: list[str], workdir: Path) -> str:
    """A config file's path as the user typed it (a token of the options), else relative to the workdir."""
    absolute = Path(path) if Path(path).is_absolute() else workdir / path
    for token in options:
        value = token.partition("=")[2] if token.startswith("-") and "=" in token else token
        if not value.startswith("-") and os.path.abspath(workdir / value) == os.path.abspath(absolute):
            return value
    try:
        return str(absolute.relative_to(workdir))
    except ValueError:
        return str(absolute)


def config_file_entries(
    snakefile_files: list[str], command_line_files: list[str], options: list[str], workdir: Path
) -> list[RunConfigFile]:
    """Every config file, lowest precedence first (the Snakefile's ``configfile:``, then --configfile)."""
    sources: list[tuple[Literal["snakefile", "command line"], str]] = [
        *(("snakefile", name) for name in snakefile_files),
        *(("command line", name) for name in command_line_files),
    ]
    entries: list[RunConfigFile] = []
    for source, name in sources:
        path = (workdir / name).resolve()
        entries.append(
            {"given": _given_name(name, options, workdir), "path": str(path), "sha256": _digest(path), "source": source}
        )
    return entries


def skillbench_provenance(checkout: Path = CHECKOUT) -> dict[str, str | None]:
    """The installed package's version and the checkout's HEAD commit (None outside a git checkout)."""
    try:
        version: str | None = metadata.version("skillbench")
    except metadata.PackageNotFoundError:
        version = None
    commit = None
    if (checkout / ".git").exists():
        # Our own checkout: rev-parse reads refs only (no hooks, filters or config-named programs run).
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_GLOBAL": "/dev/null"}
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        try:
            found = subprocess.run(
                ["git", "-C", str(checkout), "rev-parse", "--verify", "--quiet", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
                env=environment,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            found = ""
        commit = found if len(found) in (40, 64) and all(c in "0123456789abcdef" for c in found) else None
    return {"version": version, "commit": commit}


def profile_of(options: list[str], env_profile: str | None, snakefile: str, workdir: Path) -> dict[str, str | None]:
    """The profiles the run used, as snakemake picks them: --profile (else $SNAKEMAKE_PROFILE), and
    --workflow-profile (else profiles/default of the workdir or beside the Snakefile)."""
    named: dict[str, list[str]] = {"--profile": [], "--workflow-profile": []}
    for index, token in enumerate(options):
        flag, equals, value = token.partition("=")
        if flag in named:
            named[flag].append(value if equals else options[index + 1] if index + 1 < len(options) else "")
    profiles = [value for value in named["--profile"] if value and value != "none"]
    profile = ", ".join(profiles) if named["--profile"] else env_profile
    chosen = named["--workflow-profile"][-1] if named["--workflow-profile"] else None
    workflow_profile: str | None = None
    if chosen != "none":
        default = Path("profiles") / (chosen or "default")
        candidates = [Path(chosen)] if chosen else []
        candidates += [workdir / default, Path(snakefile).parent / default]
        found = next((path for path in candidates if path.exists()), None)
        workflow_profile = None if found is None else _given_name(str(found), [], workdir)
    return {"profile": profile or None, "workflow_profile": workflow_profile}


def run_record(
    *,
    config: dict[str, Any],
    config_files: list[RunConfigFile],
    overrides: dict[str, Any],
    argv: list[str],
    profile: dict[str, str | None],
    workdir: Path,
    snakefile: str,
    secrets: list[str],
    started_at: str,
    provenance: dict[str, str | None],
    pid: int,
    price_table: dict[str, str] | None = None,
) -> RunRecord:
    """The run.json document of a run starting now in process ``pid`` (``argv``: snakemake's command line);
    ``price_table``: the pinned community price table the run prices with (source, file, digest), if any."""
    command = [redact_text(token, secrets) for token in argv]
    record: RunRecord = {
        "schema": "run/v1",
        "experiment": config["experiment"],
        "started_at": started_at,
        "workdir": str(workdir),
        "snakefile": snakefile,
        "config_files": config_files,
        "config_overrides": json.loads(redact_text(json.dumps(overrides, default=str), secrets)),
        "config": json.loads(json.dumps(config, default=str)),
        "command": command,
        "workflow_options": workflow_options(command[1:]),
        "profile": {"profile": profile.get("profile"), "workflow_profile": profile.get("workflow_profile")},
        "skillbench": {"version": provenance.get("version"), "commit": provenance.get("commit")},
        "process": {"pid": pid, "host": socket.gethostname(), "start_ticks": start_ticks(pid)},
        "price_table": cast(RunPriceTable | None, price_table),
    }
    return record


def record_run(
    results_dir: str | Path,
    *,
    config: dict[str, Any],
    snakefile_files: list[str],
    command_line_files: list[str],
    overrides: dict[str, Any],
    argv: list[str],
    env_profile: str | None,
    snakefile: str,
    secrets: list[str],
    price_table: dict[str, str] | None = None,
) -> RunRecord:
    """Write run.json for the run starting now in this process (the start hook of workflow/rules/run_hooks.smk)."""
    workdir = Path.cwd()
    options = workflow_options(argv[1:])
    record = run_record(
        config=config,
        config_files=config_file_entries(snakefile_files, command_line_files, options, workdir),
        overrides=overrides,
        argv=argv,
        profile=profile_of(options, env_profile, snakefile, workdir),
        workdir=workdir,
        snakefile=snakefile,
        secrets=secrets,
        started_at=artifacts.utc_timestamp(),
        provenance=skillbench_provenance(),
        pid=os.getpid(),
        price_table=price_table,
    )
    write_run_record(results_dir, record)
    return record


def write_run_record(results_dir: str | Path, record: RunRecord) -> None:
    artifacts.write_artifact(Path(layout.run_record(results_dir)), cast(dict[str, Any], record), KIND)


def read_run_record(results_dir: str | Path) -> RunRecord | None:
    """The run.json of a results folder (validated), or None when the folder has none."""
    path = Path(layout.run_record(results_dir))
    if not path.is_file():
        return None
    return cast(RunRecord, artifacts.read_artifact(path, KIND))


def program(record: RunRecord | None, fallback: str = "snakemake") -> str:
    """The snakemake program as the user typed it (e.g. ``.venv/bin/snakemake``)."""
    typed = record["command"][0] if record else ""
    return typed if Path(typed).name == "snakemake" else fallback


def snakemake_command(record: RunRecord | None, *action: str, fallback: str = "snakemake") -> str:
    """A snakemake command line that acts on the run's experiment: ``action`` plus the options that chose its
    workflow and config. Positional targets go in ``action`` before any option."""
    options = record["workflow_options"] if record else []
    return shlex.join([program(record, fallback), *action, *options])


def typed_command(record: RunRecord) -> str:
    """The run's own command line, redacted (run it again to resume)."""
    return shlex.join(record["command"])


def run_alive(record: RunRecord) -> bool | None:
    """Whether the run's snakemake process still lives; None when it runs on another host (cannot tell)."""
    process = record["process"]
    if process["host"] != socket.gethostname():
        return None
    return is_running(process["pid"], process["start_ticks"])


def busy_message(results_dir: str | Path) -> str | None:
    """One sentence naming the live run of this experiment (another snakemake process), or None."""
    try:
        record = read_run_record(results_dir)
    except artifacts.ArtifactError:
        return None
    if record is None or record["process"]["pid"] == os.getpid() or not run_alive(record):
        return None
    pid = record["process"]["pid"]
    return (
        f"skillbench: {results_dir} is already being run by snakemake pid {pid} on {record['process']['host']}, "
        f"started {record['started_at']} as `{typed_command(record)}`; wait for it to end, or stop it "
        f"(Ctrl-C in its terminal, or `kill -TERM {pid}`) and run again."
    )


WORKFLOW_CONFIG = CHECKOUT / "config" / "config.yaml"


def config_layers(configfiles: list[Path], default: Path) -> list[Path]:
    """The config files a run in this folder merges, lowest first, as its Snakefile and `snakemake --configfile` do:
    the workflow's own config/config.yaml, then this folder's ``default`` (config/config.yaml) when it is another
    file (a project folder's, which holds only what differs: `skillbench init`), then the given files."""
    layers = [WORKFLOW_CONFIG] if WORKFLOW_CONFIG.is_file() else []
    if default.is_file() and not any(default.resolve() == layer.resolve() for layer in layers):
        layers.append(default)
    return layers + [path for path in configfiles if not any(path.resolve() == layer.resolve() for layer in layers)]


def _differing_keys(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    keys = sorted(set(left) | set(right))
    return [key for key in keys if artifacts.compact_json(left.get(key)) != artifacts.compact_json(right.get(key))]


def experiment_config(
    results_dir: str | Path | None, configfiles: list[Path], *, default: Path = DEFAULT_CONFIG
) -> tuple[dict[str, Any], list[str]]:
    """(the config, notes for the user) of the experiment under ``results_dir``.

    The run's own config (run.json) unless ``configfiles`` are given, which win (merged over ``default``), with a
    warning when they disagree with the run's; without a run.json, ``default`` with a note."""
    record = read_run_record(results_dir) if results_dir is not None else None
    where = layout.run_record(results_dir) if results_dir is not None else None
    notes: list[str] = []
    if configfiles:
        config = configcheck.load_config(*config_layers(configfiles, default))
        if record is not None:
            differ = _differing_keys(record["config"], config)
            if differ:
                notes.append(
                    f"warning: {', '.join(map(str, configfiles))} differ from the config {results_dir} was run with "
                    f"({where}) in {', '.join(differ)}; using {', '.join(map(str, configfiles))} "
                    "(leave out --configfile to use the run's)"
                )
        return config, notes
    if record is not None:
        config = configcheck.validate_config(json.loads(json.dumps(record["config"])), source=str(where))
        changed = [
            entry["given"]
            for entry in record["config_files"]
            if not Path(entry["path"]).is_file() or _digest(Path(entry["path"])) != entry["sha256"]
        ]
        if changed:
            notes.append(
                f"note: {', '.join(changed)} changed since the run started; using the config the run was started "
                f"with ({where})"
            )
        return config, notes
    config = configcheck.load_config(*config_layers([], default))
    if results_dir is not None:
        notes.append(
            f"note: {results_dir} has no run.json (a run started before skillbench recorded one); using {default}: "
            "pass --configfile with the files the run used if it used others"
        )
    return config, notes
