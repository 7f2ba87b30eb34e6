"""Rule steps: the I/O edge between Snakemake shims and the library.

Each function reads its inputs (validating them), calls the pure library, and writes its
outputs atomically after validating them. Shims in `scripts/<rule>.py` call exactly one of
these with plain values taken from the `snakemake` object.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from . import artifacts, cells
from .redaction import secrets_from_environment
from .tasks import bind_task as bind_task_files
from .tasks import load_suite, select_tasks

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def find_task(suite: str | Path, task_id: str) -> dict[str, Any]:
    for task in load_suite(suite):
        if task["id"] == task_id:
            return task
    raise artifacts.ArtifactError(f"{suite}: no task with id {task_id!r}")


def bind_task(*, suite: str, task_id: str, binding_out: str, template_out: str, oracle_out: str) -> None:
    task = find_task(suite, task_id)
    binding = bind_task_files(task, suite=Path(suite), template_dir=Path(template_out), oracle_dir=Path(oracle_out))
    artifacts.write_artifact(Path(binding_out), binding, "task-binding")


def merge_bindings(*, suite: str, binding_paths: list[str], include_expensive: bool, only: list[str],
                   out: str) -> None:
    selection = select_tasks(load_suite(suite), include_expensive=include_expensive, only=only)
    bindings = {doc["id"]: doc for doc in (artifacts.read_artifact(Path(p), "task-binding") for p in binding_paths)}
    document = {
        "schema": "task-bindings/v1",
        "suite": suite,
        "tasks": [bindings[task["id"]] for task in selection.tasks],
        "skipped_expensive": selection.skipped_expensive,
    }
    artifacts.write_artifact(Path(out), document, "task-bindings")


def resolve_cli(name: str, project_root: Path = PROJECT_ROOT) -> Path:
    """The Claude Code CLI: an explicit path, else tools/node_modules/.bin/<name>, else PATH."""
    candidate = Path(name).expanduser()
    if "/" in name:
        if candidate.is_file():
            return candidate.resolve()
        raise artifacts.ArtifactError(f"config agent.cli: {name} does not exist")
    local = project_root / "tools" / "node_modules" / ".bin" / name
    if local.exists():
        return local.resolve()
    found = shutil.which(name)
    if found:
        return Path(found).resolve()
    raise artifacts.ArtifactError(f"config agent.cli: {name!r} is neither in {local.parent} nor on PATH; "
                                  "run `make setup` to install the Claude Code CLI")


def cli_version(cli: Path) -> str | None:
    """Version from the npm package the binary ships in (no process start on every cell)."""
    for parent in cli.parents:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                package = json.loads(manifest.read_text())
            except (OSError, json.JSONDecodeError):
                return None
            if package.get("name") == "@anthropic-ai/claude-code":
                return package.get("version")
    return None


def model_script_path(config: dict[str, Any]) -> Path:
    return Path(config["model"]["script"] or Path(config["tasks"]["suite"]).parent / "model-script.yaml")


def api_key(config: dict[str, Any]) -> str | None:
    keys = secrets_from_environment([config["model"]["api_key_env"]])
    return keys[0] if keys else None


def run_cell(*, config: dict[str, Any], task_id: str, arm: str, run: int, binding: str, template: str,
             oracle_snapshot: str, skills_root: str, record_out: str, attempt: int, breaker_state: str,
             overlay: str | None = None, overlay_digest: str | None = None, log=None) -> None:
    from .scripted_model import load_model_script

    task = find_task(config["tasks"]["suite"], task_id)
    task_binding = artifacts.read_artifact(Path(binding), "task-binding")
    cli = resolve_cli(config["agent"]["cli"])
    run_dir = Path(record_out).parent
    key = api_key(config)
    if config["model"]["provider"] == "anthropic" and not key:
        raise artifacts.ArtifactError(f"model.provider is anthropic but ${config['model']['api_key_env']} is not "
                                      "set; export the key in the environment (never in config)")
    context = cells.CellContext(
        config=config, template=Path(template), oracle_snapshot=Path(oracle_snapshot), run_dir=run_dir,
        claude_bin=cli, cli_version=cli_version(cli), api_key=key,
        model_script=load_model_script(model_script_path(config)) if config["model"]["provider"] == "scripted"
        else None,
        skills_source=Path(skills_root), overlay=Path(overlay) if overlay else None, overlay_digest=overlay_digest,
        log=log)
    record = cells.run_cell(task, task_binding, arm, run, context, attempt=attempt,
                            attempts=config["agent"]["attempts"], breaker_state=Path(breaker_state))
    artifacts.validate(record["row"], "result-row", source=f"{record_out} (row)")
    artifacts.write_artifact(Path(record_out), record, "cell-record")


def canonical_order(rows: list[dict[str, Any]], task_order: list[str], arm_order: list[str]) -> list[dict[str, Any]]:
    """Task-file order, then run-major, arm-minor."""
    return sorted(rows, key=lambda row: (task_order.index(row["task"]), row["run"], arm_order.index(row["arm"])))


def collect_results(*, records: list[str], bindings: str, arm_order: list[str], out: str) -> None:
    task_order = [task["id"] for task in artifacts.read_artifact(Path(bindings), "task-bindings")["tasks"]]
    rows = []
    for path in records:
        record = artifacts.read_artifact(Path(path), "cell-record")
        rows.append(artifacts.validate(record["row"], "result-row", source=f"{path} (row)"))
    artifacts.write_jsonl(Path(out), canonical_order(rows, task_order, arm_order), "result-row")


def render_report(*, results: str, bindings: str, config: dict[str, Any], arm_order: list[str], out: str,
                  promotion: str | None = None, title: str = "skillbench benchmark") -> None:
    from .report import render_report as render

    rows = artifacts.read_jsonl(Path(results), "result-row")
    bound = artifacts.read_artifact(Path(bindings), "task-bindings")
    promotion_doc = artifacts.read_artifact(Path(promotion), "promotion") if promotion else None
    provenance = {
        "model": config["model"]["name"],
        "provider": config["model"]["provider"],
        "effort": config["model"]["effort"] or "CLI default",
        "selected_tasks": [task["id"] for task in bound["tasks"]],
        "skipped_tasks": bound["skipped_expensive"],
        "runs": config["runs"],
        "run_status": "complete",
    }
    text = render(rows, title=title, task_order=provenance["selected_tasks"], arm_order=arm_order,
                  provenance=provenance, promotion=promotion_doc)
    artifacts.atomic_write_text(Path(out), text)

