"""The task check: a task's own validation before any session is paid for (`check_task`, `skillbench check-tasks`).

On the bound template, in the same sandbox a cell uses (the cell's verify and oracle runners, `verify.run_checked`
and `verify.run_hidden_oracle`): run `setup`, then `verify` and the hidden oracle on the untouched code. The oracle
must fail there — a task whose oracle passes on the base has nothing to fix (unless the task declares
`oracle_on_base: pass`: its oracle guards behaviour to keep, as in a refactoring) — and must be able to run at all
(a command that is not found, a test file that does not exist, a collection error). `verify` must do what the task
declares with `verify_on_base` (when it declares it). With a reference solution (`solution: {patch: …}` or
`{ref: …}`, hidden like the oracle) applied, verify and the oracle must both pass: the SWE-bench "fail-to-pass"
validation. Every unmet expectation is one sentence with the command, its exit code and the end of its output.

A review task is checked on its own terms: `setup`, then its change must apply to the task's commit, its labels
must be valid, fit the review class (a defect case has defects, a clean control none) and point at lines that
exist in the changed files, and its reference review (`solution: {review: …}`) must score full marks while an
empty review scores nothing on a defect case (`grading.review.check_review_task`). A trigger task (a labelled
prompt) runs only its `setup`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbench.base.artifacts import ArtifactError, read_regular_file
from skillbench.base.records import TaskBinding
from skillbench.base.redaction import redact_text
from skillbench.execution import quota, repo
from skillbench.execution.sandbox import Sandbox, SandboxLimits
from skillbench.experiment.settings import CheckSettings, StepTimeouts
from skillbench.experiment.suite import REVIEW_CHANGE_TARGET, REVIEW_LABELS_TARGET, is_review_task, is_trigger_task
from skillbench.grading import oracle, review
from skillbench.grading.verify import VerifierRun, run_checked, run_hidden_oracle, verifier_environment

TAIL_CHARS = 1500
# Exit codes of a command the shell could not run at all, whatever the command.
NOT_RUNNABLE_EXIT_CODES = {126: "not executable", 127: "command not found"}
# pytest: 2 interrupted (collection errors, an import error in a test file), 3 internal error, 4 usage error
# (a test file or folder that does not exist), 5 no tests collected.
PYTEST_NOT_RUN = {
    2: "collection error",
    3: "internal error",
    4: "usage error (a file that does not exist?)",
    5: "no tests collected",
}


class TaskCheckError(ArtifactError):
    """A task failed its check; the message names the task, the command, the exit code and the output tail."""


def _tail(text: str, secrets: list[str]) -> str:
    return redact_text(text, secrets)[-TAIL_CHARS:]


def _step(
    name: str, command: str, run: VerifierRun | Any, expected: str, met: bool, secrets: list[str]
) -> dict[str, Any]:
    output = run.output if isinstance(run, VerifierRun) else f"{run.stdout_tail}\n{run.stderr_tail}".strip()
    exit_code = run.exit_code if isinstance(run, VerifierRun) else run.returncode
    return {
        "step": name,
        "command": command,
        "state": run.state,
        "exit_code": exit_code,
        "expected": expected,
        "met": met,
        "tail": _tail(output, secrets),
    }


def _problem(task_id: str, step: dict[str, Any], why: str) -> str:
    tail = step["tail"].strip().splitlines()[-12:]
    shown = ("\n    " + "\n    ".join(tail)) if tail else " (no output)"
    return (
        f"task {task_id}: {why}\n  command: {step['command']}\n  exit code: {step['exit_code']} "
        f"({step['state']})\n  output tail:{shown}"
    )


def cannot_run(command: str, run: VerifierRun) -> str | None:
    """Why an oracle run says nothing about the code (it could not run), or None."""
    if run.state in ("timeout", "killed"):
        return f"it {run.state}"
    if run.exit_code in NOT_RUNNABLE_EXIT_CODES:
        return NOT_RUNNABLE_EXIT_CODES[run.exit_code]
    if "pytest" in command and run.exit_code in PYTEST_NOT_RUN:
        return f"pytest exit {run.exit_code}: {PYTEST_NOT_RUN[run.exit_code]}"
    return None


def check_task(
    task: dict[str, Any],
    binding: TaskBinding,
    *,
    settings: CheckSettings,
    template: Path,
    oracle_snapshot: Path,
    solution: bytes | None,
    secrets: Sequence[str] = (),
    side_by_side: bool = False,
) -> dict[str, Any]:
    """Run the check in a fresh sandboxed clone of the template; return the `task-check` document (never raises for
    the task's own failures: `ok` is false and `problems` say why). `side_by_side`: a code task with a solution and
    no `setup` is checked on the base and on the solution at once, in two clones (the same steps and the same
    document, in about half the time when two cores are free; `tasks mine` checks every candidate so)."""
    files = oracle.load_snapshot(oracle_snapshot, binding)
    plain = not (task.get("setup") or is_review_task(task) or is_trigger_task(task))
    if side_by_side and solution is not None and plain:
        reference = solution

        def on_base(checks: _Checks) -> list[str]:
            return checks._stage("base", has_solution=True)

        def on_solution(checks: _Checks) -> list[str]:
            return checks.solution_stage(reference)

        with ThreadPoolExecutor(2) as pool:
            base, solved = pool.map(
                lambda stage: _in_clone(task, files, settings, template, list(secrets), stage), (on_base, on_solution)
            )
        # As one clone would: the solution's steps count only when the base met every expectation.
        steps, problems = base if base[1] else (base[0] + solved[0], solved[1])
    else:
        steps, problems = _in_clone(task, files, settings, template, list(secrets), lambda checks: checks.run(solution))
    document = _document(task["id"], steps, problems, solution is not None)
    document["inputs_sha256"] = inputs_digest(task, binding, solution, settings)
    return document


def _in_clone(
    task: dict[str, Any],
    files: list[tuple[str, bytes]],
    settings: CheckSettings,
    template: Path,
    secrets: list[str],
    work: Callable[[_Checks], list[str]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """`work` on a fresh sandboxed clone of the template: the steps it ran and the problems it found."""
    steps: list[dict[str, Any]] = []
    with quota.private_root("skillbench-check-", quota.disk_quota_mb(settings.sandbox)) as private_root:
        clone = private_root / "workspace"
        repo.clone_template(template, clone)
        sandbox = Sandbox(
            settings.sandbox.backend,
            clone,
            private_root,
            bwrap=settings.sandbox.bwrap,
            limits=SandboxLimits.of(settings.sandbox.limits),
        )
        try:
            problems = work(_Checks(task, sandbox, files, private_root, steps, secrets, settings.timeouts))
        finally:
            sandbox.close()
    return steps, problems


def inputs_digest(task: dict[str, Any], binding: TaskBinding, solution: bytes | None, settings: CheckSettings) -> str:
    """What a task check's outcome depends on, as one SHA-256: the task as written, its binding (the resolved and
    sanitized commits, the oracle's digests), the reference solution's bytes and the check's settings (timeouts,
    sandbox). A check.json with the same digest says what a new check would (`skillbench check` reuses it)."""
    document = {
        "task": task,
        "binding": binding,
        "solution": None if solution is None else hashlib.sha256(solution).hexdigest(),
        "settings": dataclasses.asdict(settings),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _Checks:
    """One task's checks in one sandbox; every step run is appended to `steps`."""

    task: dict[str, Any]
    sandbox: Sandbox
    files: list[tuple[str, bytes]]
    private_root: Path
    steps: list[dict[str, Any]]
    secrets: list[str]
    timeouts: StepTimeouts

    def run(self, solution: bytes | None) -> list[str]:
        """The problems found: setup, then verify and the oracle on the base, then (with a solution that
        applies) on the solution."""
        if self.task.get("setup") and not self._setup():
            return [_problem(self.task["id"], self.steps[-1], "`setup` fails on the untouched code")]
        if is_review_task(self.task):
            return self._review(solution)
        if is_trigger_task(self.task):
            return []  # a labelled prompt: nothing runs but its session
        problems = self._stage("base", has_solution=solution is not None)
        if solution is None or problems:
            return problems
        return self.solution_stage(solution)

    def solution_stage(self, solution: bytes) -> list[str]:
        """The reference solution applied, then verify and the oracle on it."""
        if not self._apply(solution):
            return [
                _problem(self.task["id"], self.steps[-1], "the reference solution does not apply to the task's commit")
            ]
        return self._stage("solution", has_solution=True)

    def _setup(self) -> bool:
        command = self.task["setup"]
        result = self.sandbox.run(["/bin/sh", "-lc", command], timeout=self.timeouts.setup_timeout_s)
        self.steps.append(_step("setup", command, result, "pass", result.ok, self.secrets))
        return result.ok

    def _apply(self, solution: bytes) -> bool:
        result = self.sandbox.apply_patch(solution)
        self.steps.append(_step("apply-solution", "git apply <solution>", result, "pass", result.ok, self.secrets))
        return result.ok

    def _review(self, reference: bytes | None) -> list[str]:
        """A review task: the change applies, and the labels and the reference review are fit to score with."""
        task_id, hidden = self.task["id"], dict(self.files)
        result = self.sandbox.apply_patch(hidden[REVIEW_CHANGE_TARGET])
        self.steps.append(_step("apply-change", "git apply <review.change>", result, "pass", result.ok, self.secrets))
        if not result.ok:
            return [_problem(task_id, self.steps[-1], "the change to review does not apply to the task's commit")]
        problems = review_task_problems(self.task, hidden[REVIEW_LABELS_TARGET], reference, self.sandbox.clone)
        self.steps.append(
            {
                "step": "review-labels",
                "command": "score the reference review and an empty review against the labels",
                "state": "ok" if not problems else "failed",
                "exit_code": None,
                "expected": "pass",
                "met": not problems,
                "tail": "",
            }
        )
        return [f"task {task_id}: {problem}" for problem in problems]

    def _stage(self, stage: str, *, has_solution: bool) -> list[str]:
        return _verify_and_oracle(
            self.task,
            self.sandbox,
            self.files,
            self.private_root,
            self.steps,
            self.secrets,
            stage=stage,
            has_solution=has_solution,
            timeout=self.timeouts.verify_timeout_s,
        )


# The most the check reads of one changed file to see that the labels' lines exist.
MAX_LABELLED_FILE_BYTES = 4 * 1024 * 1024


def review_task_problems(
    task: dict[str, Any], labels_payload: bytes, reference: bytes | None, clone: Path
) -> list[str]:
    """What makes a review task unfit to score sessions with (empty: fit): labels that do not parse or do not fit
    the class, a defect on a line the changed file does not have, a reference review short of full marks."""
    try:
        labels = review.parse_labels(labels_payload, source="review.labels")
    except review.ReviewLabelsError as exc:
        return [str(exc)]
    problems = []
    if task["class"] == "review-clean" and labels["defects"]:
        problems.append("a review-clean task's labels must have no defects (it is a clean control)")
    if task["class"] == "review-defect" and not labels["defects"]:
        problems.append("a review-defect task's labels need at least one defect (or make it review-clean)")
    for defect in labels["defects"]:
        lines = _line_count(clone, defect["path"])
        if lines is None:
            problems.append(f"labelled defect {defect['id']}: {defect['path']} is not a file of the changed code")
        elif defect["line_end"] > lines:
            problems.append(
                f"labelled defect {defect['id']}: {defect['path']} has {lines} lines as changed, not "
                f"{defect['line_end']} (label lines are of the file as changed)"
            )
    if reference is None:
        empty = review.score_review(review.empty_review(), labels)
        if labels["defects"] and empty["weighted_f1"] != 0.0:
            problems.append("an empty review scores above zero on this defect case")
        return problems
    try:
        output = review.parse_review_output(reference, source="solution.review")
    except review.ReviewOutputError as exc:
        return [*problems, f"{exc} ({exc.kind})"]
    return [*problems, *review.check_review_task(labels, output)]


def _line_count(clone: Path, relative: str) -> int | None:
    """Lines of a regular file of the clone (bounded, no symlink followed), None when there is none."""
    normalised = review.normalise_path(relative)
    if normalised is None:
        return None
    path = clone / normalised
    if not path.parent.resolve().is_relative_to(clone.resolve()):
        return None
    try:
        payload = read_regular_file(path, MAX_LABELLED_FILE_BYTES, what="labelled file")
    except (ArtifactError, OSError):
        return None
    return payload.count(b"\n") + (0 if payload.endswith(b"\n") or not payload else 1)


def _verify_and_oracle(
    task: dict[str, Any],
    sandbox: Sandbox,
    files: list[tuple[str, bytes]],
    private_root: Path,
    steps: list[dict[str, Any]],
    secrets: list[str],
    *,
    stage: str,
    has_solution: bool,
    timeout: float,
) -> list[str]:
    task_id = task["id"]
    problems: list[str] = []
    verify = run_checked(sandbox, task["verify"], timeout=timeout, env=verifier_environment(sandbox, "verify"))
    if stage == "base":
        expected = task.get("verify_on_base", "any")
    else:
        expected = "pass"
    met = expected == "any" or verify.passed == (expected == "pass")
    steps.append(_step(f"verify-on-{stage}", task["verify"], verify, expected, met, secrets))
    if not met:
        where = "the untouched code" if stage == "base" else "the reference solution"
        declared = f" although the task declares `verify_on_base: {expected}`" if stage == "base" else ""
        verb = "fails" if expected == "pass" else "passes"
        problems.append(_problem(task_id, steps[-1], f"`verify` {verb} on {where}{declared}"))
    command = task["oracle"]["command"]
    run = run_hidden_oracle(sandbox, task, files, timeout=timeout, private_root=private_root)
    unrunnable = cannot_run(command, run)
    if stage == "base" and task.get("oracle_on_base") == "pass":
        # A task whose oracle guards behaviour that must be kept (a refactoring): it must pass on the base.
        steps.append(_step("oracle-on-base", command, run, "pass", run.passed, secrets))
        if not run.passed:
            why = f"cannot run ({unrunnable})" if unrunnable else "fails"
            problems.append(
                _problem(
                    task_id,
                    steps[-1],
                    f"the hidden oracle {why} on the untouched code although the task declares `oracle_on_base: pass`",
                )
            )
    elif stage == "base":
        # A collection error on the base is what an oracle of not-yet-written code looks like; a reference
        # solution that passes proves the oracle runs, so it is accepted only then.
        tolerated = unrunnable is not None and has_solution and run.exit_code == 2 and "pytest" in command
        met = not run.passed and (unrunnable is None or tolerated)
        steps.append(_step("oracle-on-base", command, run, "fail", met, secrets))
        if run.passed:
            problems.append(
                _problem(
                    task_id,
                    steps[-1],
                    "the hidden oracle passes on the untouched code: there is "
                    "nothing to fix (check the oracle, or bind the task to a "
                    "commit before the fix)",
                )
            )
        elif not met:
            hint = (
                " (if it imports code the task asks for, give a reference `solution:` that makes it pass)"
                if run.exit_code == 2
                else ""
            )
            problems.append(_problem(task_id, steps[-1], f"the hidden oracle cannot run ({unrunnable}){hint}"))
    else:
        steps.append(_step("oracle-on-solution", command, run, "pass", run.passed, secrets))
        if not run.passed:
            problems.append(_problem(task_id, steps[-1], "the hidden oracle fails on the reference solution"))
    return problems


def _document(task_id: str, steps: list[dict[str, Any]], problems: list[str], has_solution: bool) -> dict[str, Any]:
    return {
        "schema": "task-check/v1",
        "task": task_id,
        "ok": not problems,
        "steps": steps,
        "problems": problems,
        "summary": summary_line(task_id, steps, problems, has_solution),
    }


def summary_line(task_id: str, steps: list[dict[str, Any]], problems: list[str], has_solution: bool) -> str:
    by_name = {step["step"]: step for step in steps}
    if problems:
        first = problems[0].splitlines()[0].removeprefix(f"task {task_id}: ")
        return f"{task_id}: REFUSED — {first}"
    if not steps or list(by_name) == ["setup"]:
        return f"{task_id}: trigger: a labelled prompt" + (", its setup passes" if steps else "")
    if "review-labels" in by_name:
        reference = "the reference review scores full marks" if has_solution else "no reference review"
        return f"{task_id}: review: the change applies, the labels fit it; {reference}"
    base = by_name.get("oracle-on-base")
    if base is None:
        parts = ["base: not checked"]
    elif base["expected"] == "pass":
        parts = ["base: oracle passes as declared"]
    else:
        parts = [f"base: oracle fails as expected (exit {base['exit_code']})"]
    verify = by_name.get("verify-on-base")
    if verify and verify["expected"] != "any":
        parts.append(f"verify {'passes' if verify['expected'] == 'pass' else 'fails'} as declared")
    parts.append("solution: verify and oracle pass" if has_solution else "no reference solution")
    return f"{task_id}: " + "; ".join(parts)


def solution_bytes(task: dict[str, Any], suite: Path, binding: TaskBinding) -> bytes | None:
    """The reference solution as a patch against the task's commit: the patch file, or the diff to `ref`."""
    solution = task.get("solution")
    if not solution:
        return None
    for key in ("patch", "review"):
        if key in solution:
            return (Path(suite).parent / solution[key]).read_bytes()
    source = Path(task["repo"]).expanduser().resolve()
    with repo.open_target(source) as target:  # never the target's own config, attributes or hooks
        resolved = target.resolve(solution["ref"])
        result = target.git(
            ["diff", "--binary", "--no-ext-diff", "--no-textconv", binding["resolved_sha"], resolved],
            capture_stdout_bytes=64 * 1024 * 1024,
        )
    if not result.ok or result.stdout_capture is None:
        raise TaskCheckError(
            f"task {task['id']}: solution.ref {solution['ref']!r}: cannot diff it against "
            f"{binding['resolved_sha']} in {source}"
        )
    return result.stdout_capture
