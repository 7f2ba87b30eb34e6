"""The yield report of a mining run: `mining-report.json` (schema `mining-report`) and `mining-report.md`.

What was scanned, how many commits were candidates, how many became tasks, each rejection with its reason, the wall
time and the time per accepted task; the last line names the `skillbench check` and `skillbench estimate` commands
for the new suite (estimate says how many tasks the design needs to detect the saving a user cares about).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from skillbench.base.artifacts import atomic_write_text, write_artifact

REPORT_JSON = "mining-report.json"
REPORT_MD = "mining-report.md"
REASON_TEXT = {
    "root-commit": "a root commit (nothing to revert to)",
    "no-test-change": "changes no test file",
    "no-source-change": "changes no source file",
    "too-many-test-files": "changes more test files than an oracle holds (8)",
    "oracle-too-large": "its test files exceed the oracle's size bounds",
    "no-test-module": "its test changes hold no test module to run",
    "no-fail-to-pass": "its tests already pass on the base (nothing to fix)",
    "does-not-run": "its tests do not run on the solution with this machine's Python and packages",
    "only-collection-errors": "its tests fail on the base only to import or collect",
    "no-pass-to-pass": "no test passes before and after it (no visible check)",
    "command-too-long": "its oracle command would be too long",
    "cannot-replay": "its solution cannot be typed through edit tools (binary or unreadable)",
    "check-failed": "fails the task check",
    "flaky": "its check passed once and failed once",
    "timeout": "a check or test run outlasted the task timeouts",
    "prompt-session-failed": "the issue-writing session failed",
    "prompt-leaked-fix": "the prompt quotes a line the solution adds",
    "prompt-too-short": "the prompt says too little to act on",
    "git-error": "git could not build its refs",
}
SCAN_REASONS = ("root-commit", "no-test-change", "no-source-change")


def report_document(
    *,
    options: dict[str, Any],
    scanned: int,
    candidates: int,
    tasks: list[dict[str, Any]],
    rejections: list[dict[str, Any]],
    wall_s: float,
    commands: dict[str, str],
) -> dict[str, Any]:
    reasons = Counter(rejection["reason"] for rejection in rejections)
    return {
        "schema": "mining-report/v1",
        **options,
        "scanned": scanned,
        "candidates": candidates,
        "accepted": len(tasks),
        "tasks": tasks,
        "rejections": rejections,
        "reasons": dict(sorted(reasons.items())),
        "wall_s": round(wall_s, 1),
        "seconds_per_accepted": round(wall_s / len(tasks), 1) if tasks else None,
        "commands": commands,
    }


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(document: dict[str, Any]) -> str:
    """The Markdown report; its last line prints the commands that check and size the new suite."""
    lines = [
        f"# Mining report: {document['repository']}",
        "",
        f"Range: {document['since'] or 'the first commit'} .. {document['until'] or 'HEAD'} (first parent, newest "
        f"first); prompt: {document['prompt']}; test command: `{document['test_command']}`"
        + (f"; stop at {document['max']} accepted" if document["max"] else ""),
        "",
        "| scanned | candidates (change source and tests) | accepted | wall time | per accepted task |",
        "| --- | --- | --- | --- | --- |",
        f"| {document['scanned']} | {document['candidates']} | {document['accepted']} | {document['wall_s']:.0f} s | "
        + (f"{document['seconds_per_accepted']:.0f} s |" if document["seconds_per_accepted"] is not None else "– |"),
        "",
    ]
    if document["reasons"]:
        lines += ["## Rejections by reason", "", "| reason | commits |", "| --- | --- |"]
        lines += [f"| {REASON_TEXT[reason]} | {count} |" for reason, count in document["reasons"].items()]
        lines.append("")
    if document["tasks"]:
        lines += ["## Accepted tasks", "", "| task | commit | class | fail-to-pass | pass-to-pass |"]
        lines.append("| --- | --- | --- | --- | --- |")
        lines += [
            f"| {task['id']} | {task['commit'][:10]} | {task['class']} | {task['fail_to_pass']} | "
            f"{task['pass_to_pass']} |"
            for task in document["tasks"]
        ]
        lines.append("")
    candidates = [item for item in document["rejections"] if item["reason"] not in SCAN_REASONS]
    if candidates:
        lines += ["## Rejected candidates", "", "| commit | subject | reason | detail |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {item['commit'][:10]} | {_escape(item['subject'][:70])} | {item['reason']} | "
            f"{_escape(item['detail'][:200])} |"
            for item in candidates
        ]
        lines.append("")
    lines.append(
        f"Next: `{document['commands']['check']}` checks every task again; `{document['commands']['estimate']}` "
        "says how many tasks the design needs for 80 % power on the saving you care about (`--saving`)."
    )
    return "\n".join(lines) + "\n"


def write_report(out: Path, document: dict[str, Any]) -> Path:
    """Validate and write both files; return the Markdown's path."""
    write_artifact(out / REPORT_JSON, document, "mining-report")
    atomic_write_text(out / REPORT_MD, render(document))
    return out / REPORT_MD
