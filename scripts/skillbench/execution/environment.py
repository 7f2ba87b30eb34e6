"""What a run needs from the machine it runs on: the agent CLIs, the model's API key, the scripted model.

Owns finding an agent's CLI (an explicit path, the project's ``tools/`` install, else PATH), telling its
version and refusing versions older than the adapter's oldest supported one; reading the API key from the environment
variable the config names (the key itself never enters config or rule params); the parse-time check that
the configured model is reachable without credentials in config; and loading the scripted model's script.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillbench.base.artifacts import ArtifactError
from skillbench.base.process import run_managed
from skillbench.base.redaction import secrets_from_environment
from skillbench.execution.agents import DEFAULT_ADAPTER
from skillbench.execution.agents.base import AgentAdapter

PROJECT_ROOT = Path(__file__).resolve().parents[3]
VERSION_PATTERN = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)")
CLI_VERSION_TIMEOUT_S = 60


def configured_cli(config: dict[str, Any], agent: AgentAdapter) -> str:
    """The CLI the config names for `agent` (`agent.cli` for Claude Code, `agents.<name>.cli` for the others)."""
    if agent.cli_setting == "agent.cli":
        return str(config["agent"]["cli"])
    section = (config.get("agents") or {}).get(agent.name) or {}
    return str(section.get("cli") or agent.default_cli)


def resolve_cli(name: str, project_root: Path = PROJECT_ROOT, *, agent: AgentAdapter = DEFAULT_ADAPTER) -> Path:
    """An agent's CLI: an explicit path, else tools/node_modules/.bin/<name>, else PATH."""
    candidate = Path(name).expanduser()
    if "/" in name:
        if candidate.is_file():
            return candidate.resolve()
        raise ArtifactError(f"config {agent.cli_setting}: {name} does not exist")
    local = project_root / "tools" / "node_modules" / ".bin" / name
    if local.exists():
        return local.resolve()
    found = shutil.which(name)
    if found:
        return Path(found).resolve()
    raise ArtifactError(
        f"config {agent.cli_setting}: {name!r} is neither in {local.parent} nor on PATH; "
        f"run `make setup` to install the {agent.name} CLI ({agent.package})"
    )


def _package_version(cli: Path, package_name: str) -> str | None:
    """The version of the npm package `package_name` the executable ships in."""
    for parent in cli.parents:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                package = json.loads(manifest.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if package.get("name") == package_name:
                version = package.get("version")
                return version if isinstance(version, str) else None
    return None


def cli_version(cli: Path, agent: AgentAdapter = DEFAULT_ADAPTER) -> str | None:
    """The CLI's version: from the npm package the executable ships in, else from `<cli> --version`."""
    packaged = _package_version(cli, agent.package)
    if packaged is not None:
        return packaged
    result = run_managed(
        [str(cli), "--version"],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "DISABLE_AUTOUPDATER": "1"},
        timeout=CLI_VERSION_TIMEOUT_S,
        cwd="/",
    )
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", result.stdout_tail) if result.ok else None
    return ".".join(match.groups()) if match else None


def _version_key(version: str) -> tuple[int, ...]:
    match = VERSION_PATTERN.match(version)
    return tuple(int(part) for part in match.groups()) if match else ()


def check_cli(name: str, agent: AgentAdapter = DEFAULT_ADAPTER) -> str:
    """Parse time: `agent`'s configured CLI exists and is recent enough; return its version (a key of every cell
    of the agent's arms)."""
    cli = resolve_cli(name, agent=agent)
    version = cli_version(cli, agent)
    if version is None:
        raise ArtifactError(
            f"config {agent.cli_setting}: cannot tell the version of {cli} (neither its npm "
            f"package.json nor `--version` names one); point {agent.cli_setting} at a {agent.package} CLI"
        )
    if _version_key(version) < _version_key(agent.min_version):
        raise ArtifactError(
            f"config {agent.cli_setting}: {agent.name} {version} at {cli} is older than the oldest "
            f"supported version {agent.min_version}; run `make setup` (it installs the pinned "
            f"CLI into tools/) or point {agent.cli_setting} at a newer one"
        )
    return version


def api_key(env_name: str) -> str | None:
    """The model's API key from the environment variable `model.api_key_env` names (None when unset)."""
    keys = secrets_from_environment([env_name])
    return keys[0] if keys else None


def secrets(env_name: str) -> list[str]:
    """What a job's log and artifacts redact: the API key, when it is set."""
    return [key for key in [api_key(env_name)] if key]


def _plain_url(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not (parts.username or parts.password or parts.query or parts.fragment)
    )


def check_model_access(model: dict[str, Any]) -> None:
    """The real API needs its key in the environment (config `model`): say so before any job starts."""
    if model["provider"] == "anthropic" and not api_key(model["api_key_env"]):
        raise ArtifactError(
            f"model.provider is anthropic but the environment variable {model['api_key_env']} is empty; "
            "export the key (never put it in config), or use model.provider: scripted for an offline run"
        )
    base_url = model["base_url"]
    if base_url and not _plain_url(base_url):
        raise ArtifactError(
            f"model.base_url must be a plain http(s) URL without credentials, query or fragment (got {base_url!r})"
        )


def load_script(path: str | None, *, task: str | None = None) -> dict[str, Any] | None:
    """The scripted model's script (the rule's input), or None for the real API; with ``task``, only what a cell
    of that task plays (`scripted_model.load_model_script`)."""
    from skillbench.execution.scripted_model import load_model_script

    return load_model_script(path, task=task) if path else None
