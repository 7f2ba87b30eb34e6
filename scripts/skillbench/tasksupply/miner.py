"""`skillbench tasks mine`: tasks from a repository's own history.

Walks the first-parent history newest first (`history`), keeps commits that change source and test files, and
turns each into a task of the ordinary format:

- target: the user's repository at `refs/skillbench/<suite>/<task>/base` (the commit with its source changes
  reverted and its test changes removed); reference solution: `…/solution` (the commit's source change only);
- hidden oracle: the commit's added or changed test files, laid over a copy of the workspace at their paths
  (`probe.overlay_command`), running the tests that pass on the solution (the fail-to-pass ones among them);
- visible `verify`: the project's test command over the tests that pass before and after (pass-to-pass);
- `class` from what the commit touched; the prompt from `prompts` (never the diff).

Each candidate's tests run in the cell sandbox on the base and on the solution (`probe`: the oracle's first run);
then the task check `skillbench check` runs (`grading.taskcheck`: its second run, and verify's): an oracle that did
as expected in the first run and not in the second is flaky. Rejected:
no fail-to-pass test, failures that are only import or collection errors, no pass-to-pass test, a run past the
task timeouts, a solution that cannot be replayed, a prompt that quotes a line the solution adds. A rejected
candidate's refs and pack are removed again; the miner stops at `--max` accepted tasks.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from skillbench.base.artifacts import ArtifactError
from skillbench.execution import agents, environment, replay, repo
from skillbench.execution.sandbox import AgentInstall
from skillbench.experiment import suite as suites
from skillbench.experiment.settings import check_settings
from skillbench.experiment.suite import MAX_ORACLE_COMMAND_BYTES, MAX_ORACLE_FILES
from skillbench.grading import taskcheck
from skillbench.grading.binding import bind_task
from skillbench.grading.oracle import MAX_ORACLE_FILE_BYTES, MAX_ORACLE_TOTAL_BYTES
from skillbench.tasksupply import history, probe, prompts, report, suitefiles
from skillbench.tasksupply.history import Commit, MiningError

DEFAULT_TEST_COMMAND = "python3 -m pytest"
SRC_LAYOUT_TEST_COMMAND = "PYTHONPATH=src python3 -m pytest"
MAX_VERIFY_BYTES = 8000
MIN_PROMPT_WORDS = 4
ORACLE_FOLDER = "oracles"
SESSIONS_FOLDER = "mining-sessions"


@dataclass(frozen=True)
class MineOptions:
    """What `skillbench tasks mine` was asked for."""

    repo: Path
    out: Path
    since: str | None = None
    until: str | None = None
    max_tasks: int | None = None
    paths: tuple[str, ...] = ()
    test_command: str | None = None
    prompt: str = "agent"
    jobs: int = 1


class Rejected(Exception):
    """A candidate is not a task; `reason` is one of report.REASON_TEXT's keys."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Context:
    """What every candidate of one mining run shares."""

    options: MineOptions
    config: dict[str, Any]
    reader: repo.TargetReader
    namespace: str
    test_command: str
    agent_install: AgentInstall | None
    api_key: str | None
    log: TextIO
    taken_ids: set[str]

    @property
    def timeout(self) -> float:
        return float(self.config["agent"]["verify_timeout_s"])


def default_test_command(reader: repo.TargetReader) -> str:
    """`python3 -m pytest`, with `PYTHONPATH=src` for a repository laid out with a `src/` folder."""
    listing = reader.git(["ls-tree", "--name-only", "HEAD", "src"])
    return SRC_LAYOUT_TEST_COMMAND if listing.ok and listing.stdout_tail.strip() else DEFAULT_TEST_COMMAND


def task_class(commit: Commit, solution_patch: bytes) -> str:
    """From what the commit touched: one file with a few lines is `trivial`, one file `single-module`, several in one
    folder `multi-file`, several folders `cross-module`."""
    lines = sum(
        1
        for line in solution_patch.decode("utf-8", "replace").splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )
    folders = {str(PurePosixPath(change.path).parent) for change in commit.source}
    if len(commit.source) == 1:
        return "trivial" if lines <= 6 else "single-module"
    return "multi-file" if len(folders) == 1 else "cross-module"


def _blob(reader: repo.TargetReader, sha: str) -> bytes:
    result = reader.git(["cat-file", "blob", sha], capture_stdout_bytes=MAX_ORACLE_FILE_BYTES + 1)
    if not result.ok or result.stdout_capture is None:
        raise Rejected("git-error", f"cannot read blob {sha[:12]}")
    if result.stdout_capture_overflow or len(result.stdout_capture) > MAX_ORACLE_FILE_BYTES:
        raise Rejected("oracle-too-large", f"a test file is larger than {MAX_ORACLE_FILE_BYTES} bytes")
    return result.stdout_capture


def oracle_files(reader: repo.TargetReader, commit: Commit) -> tuple[list[tuple[str, bytes]], list[str]]:
    """The commit's added or changed test files (path, bytes) and the test modules among them."""
    changed = [change for change in commit.tests if not change.deleted]
    if not changed:
        raise Rejected("no-test-module", "the commit only deletes test files")
    if len(changed) > MAX_ORACLE_FILES:
        raise Rejected("too-many-test-files", f"{len(changed)} test files changed; an oracle holds {MAX_ORACLE_FILES}")
    files = [(change.path, _blob(reader, change.new_sha)) for change in changed]
    if sum(len(payload) for _, payload in files) > MAX_ORACLE_TOTAL_BYTES:
        raise Rejected("oracle-too-large", f"the test files exceed {MAX_ORACLE_TOTAL_BYTES} bytes together")
    modules = [path for path, _ in files if path.endswith(".py") and history.is_test_path(path)]
    modules = [path for path in modules if PurePosixPath(path).name != "conftest.py"]
    if not modules:
        raise Rejected("no-test-module", "the commit's test changes hold no test module")
    return files, modules


@dataclass(frozen=True)
class Probed:
    """What the candidate's test runs showed: fail-to-pass, the oracle's arguments, pass-to-pass and the verify
    command, and the base run's failure output."""

    fail_to_pass: list[str]
    oracle_arguments: list[str]
    pass_to_pass: list[str]
    verify: str
    failing: prompts.Failing


def _module(node: str) -> str:
    return node.split("::", 1)[0]


def verify_command(test_command: str, base: probe.TestRun, solution: probe.TestRun) -> tuple[str, list[str]]:
    """The test command over the files holding pass-to-pass tests, deselecting their other tests; and those tests."""
    pass_to_pass = sorted(base.passed & solution.passed)
    if not pass_to_pass:
        raise Rejected("no-pass-to-pass", "no test passes both before and after the commit")
    files = sorted({_module(node) for node in pass_to_pass})
    seen = set(base.outcomes) | set(solution.outcomes)
    others = sorted(node for node in seen - set(pass_to_pass) if _module(node) in files)
    deselect = [token for node in others for token in ("--deselect", node)]
    command = probe.pytest_command(test_command, [*files, *deselect])
    if len(command.encode()) > MAX_VERIFY_BYTES:
        whole = [name for name in files if not any(_module(node) == name for node in others)]
        if not whole:
            raise Rejected("command-too-long", "the pass-to-pass tests need too long a verify command")
        command = probe.pytest_command(test_command, whole)
        pass_to_pass = [node for node in pass_to_pass if _module(node) in whole]
    return command, pass_to_pass


def _timed_out(runs: dict[str, probe.TestRun]) -> None:
    for name, run in runs.items():
        if run.timed_out:
            raise Rejected("timeout", f"the {name} run {run.state} (agent.verify_timeout_s)")


def judge_oracle(modules: list[str], base: probe.TestRun, solution: probe.TestRun) -> tuple[list[str], list[str]]:
    """Fail-to-pass and the oracle's arguments from the commit's tests on the base and on the solution, or Rejected
    (the suite runs are not needed to reject)."""
    _timed_out({"oracle-on-base": base, "oracle-on-solution": solution})
    in_modules = {node for node in solution.outcomes if _module(node) in modules}
    fail_to_pass = sorted((solution.passed & in_modules) - base.passed)
    if not fail_to_pass and not (solution.passed & in_modules):
        errors = {
            module: solution.collection_errors[module] for module in modules if module in solution.collection_errors
        }
        if errors or not in_modules:
            module, message = next(iter(errors.items()), (modules[0], "no test collected"))
            raise Rejected("does-not-run", f"{module} does not run on the solution here: {message[:200]}")
    if not fail_to_pass:
        broken = sorted(node for node in in_modules if solution.outcomes[node] in ("failed", "error"))
        detail = (
            f"the commit's tests do not pass on the solution either ({', '.join(broken[:3])})"
            if broken and not (solution.passed & in_modules)
            else "every test of the commit that passes on the solution passes on the base too"
        )
        raise Rejected("no-fail-to-pass", detail)
    if all(probe.import_only(node, base) for node in fail_to_pass):
        raise Rejected(
            "only-collection-errors",
            f"the {len(fail_to_pass)} fail-to-pass test(s) fail on the base only to import or collect",
        )
    failing_solution = [node for node in in_modules if solution.outcomes[node] in ("failed", "error")]
    if failing_solution or solution.collection_errors:
        arguments = sorted(solution.passed & in_modules)
    else:
        arguments = list(modules)
    return fail_to_pass, arguments


def judge_runs(
    test_command: str,
    modules: list[str],
    runs: dict[str, probe.TestRun],
) -> Probed:
    """Fail-to-pass, the oracle's arguments and the visible check from the four probe runs."""
    _timed_out(runs)
    base = runs["oracle-on-base"]
    fail_to_pass, arguments = judge_oracle(modules, base, runs["oracle-on-solution"])
    verify, pass_to_pass = verify_command(test_command, runs["suite-on-base"], runs["suite-on-solution"])
    failing = prompts.failing_summary(fail_to_pass, base.messages, base.output)
    return Probed(fail_to_pass, arguments, pass_to_pass, verify, failing)


def _export(reader: repo.TargetReader, sha: str) -> Callable[[Path], None]:
    def fill(clone: Path) -> None:
        reader.export(sha, clone)
        (clone / prompts.OUTPUT_DIR).mkdir()

    return fill


def _probe(
    context: Context, refs: history.TaskRefs, files: list[tuple[str, bytes]], modules: list[str]
) -> dict[str, probe.TestRun]:
    """The four probe runs, the base's and the solution's side by side: first the commit's tests (a candidate with
    nothing to fix is rejected there, before the slower whole-suite runs), then the project's suite."""
    stages = {"base": refs.base, "solution": refs.solution}

    def oracle_run(stage: str) -> probe.TestRun:
        with probe.sandbox_over(
            context.config, f"skillbench-mine-{stage}-", _export(context.reader, stages[stage])
        ) as box:
            return probe.run_overlaid(
                box, context.test_command, files, modules, timeout=context.timeout, private_root=box.private_root
            )

    def suite_run(stage: str) -> probe.TestRun:
        with probe.sandbox_over(
            context.config, f"skillbench-mine-{stage}-", _export(context.reader, stages[stage])
        ) as box:
            return probe.run_suite(box, context.test_command, timeout=context.timeout)

    with ThreadPoolExecutor(2) as pool:
        base, solution = pool.map(oracle_run, stages)
        judge_oracle(modules, base, solution)
        suite_base, suite_solution = pool.map(suite_run, stages)
    return {
        "oracle-on-base": base,
        "oracle-on-solution": solution,
        "suite-on-base": suite_base,
        "suite-on-solution": suite_solution,
    }


ORACLE_STEPS = ("oracle-on-base", "oracle-on-solution")


def check_again(task: dict[str, Any], suite_file: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The task check `skillbench check` runs, on a task whose oracle the probes already saw fail on the base and pass
    on the solution: that was the first run, this is the second. Rejected when it fails: as flaky when the oracle
    now does otherwise, as timed out when a step ran out of time, else with the check's first problem."""
    settings = check_settings(config)
    task = suites.validate_suite({"tasks": [task]}, suite_file)[0]  # as the workflow reads it, checked
    with tempfile.TemporaryDirectory(prefix="skillbench-mine-check-") as scratch:
        bound = bind_task(task, suite=suite_file, template_dir=Path(scratch) / "t", oracle_dir=Path(scratch) / "o")
        document = taskcheck.check_task(
            task,
            bound.binding,
            settings=settings,
            template=Path(scratch) / "t",
            oracle_snapshot=Path(scratch) / "o",
            solution=taskcheck.solution_bytes(task, suite_file, bound.binding),
            side_by_side=True,
        )
    if document["ok"]:
        return document
    if any(step["state"] in ("timeout", "killed") for step in document["steps"]):
        raise Rejected("timeout", document["summary"])
    first = document["problems"][0].splitlines()[0]
    if any(step["step"] in ORACLE_STEPS and not step["met"] for step in document["steps"]):
        raise Rejected("flaky", f"the oracle did as expected in the first run, not in the check's: {first}")
    raise Rejected("check-failed", first)


def _solution_patch(reader: repo.TargetReader, refs: history.TaskRefs) -> bytes:
    result = reader.git(
        ["diff", "--binary", "--no-ext-diff", "--no-textconv", refs.base, refs.solution],
        capture_stdout_bytes=repo.MAX_DIFF_BYTES,
    )
    if not result.ok or result.stdout_capture is None:
        raise Rejected("git-error", "cannot diff the solution against the base")
    return result.stdout_capture


def _check_replay(reader: repo.TargetReader, refs: history.TaskRefs, patch: bytes) -> None:
    """The scripted model must be able to type the solution: a text diff that fits the base's files."""

    def read_text(path: str) -> str | None:
        relative = path.removeprefix("/workspace/")
        result = reader.git(["cat-file", "blob", f"{refs.base}:{relative}"], capture_stdout_bytes=4 << 20)
        if not result.ok or result.stdout_capture is None:
            return None
        try:
            return result.stdout_capture.decode("utf-8")
        except UnicodeDecodeError:
            return None

    try:
        replay.plan_replay(patch, read_text, "/workspace")
    except replay.ReplayError as exc:
        raise Rejected("cannot-replay", str(exc)) from exc


def _prompt(context: Context, commit: Commit, refs: history.TaskRefs, probed: Probed, task_id: str) -> str:
    message = prompts.message_text(commit.subject, commit.body)
    if context.options.prompt == "commit-message":
        return message
    fill = _export(context.reader, refs.base)
    with probe.sandbox_over(context.config, "skillbench-mine-issue-", fill, context.agent_install) as sandbox:
        try:
            return prompts.write_issue(
                sandbox=sandbox,
                config=context.config,
                message=message,
                failing=probed.failing,
                label=task_id,
                transcript_dir=context.options.out / SESSIONS_FOLDER / task_id / "transcripts",
                api_key=context.api_key,
                log=context.log,
            )
        except prompts.PromptSessionError as exc:
            raise Rejected("prompt-session-failed", str(exc)) from exc


def _task_id(context: Context, commit: Commit) -> str:
    base = history.task_slug(commit)
    task_id, counter = base, 2
    while task_id in context.taken_ids:
        task_id, counter = f"{base}-{counter}", counter + 1
    context.taken_ids.add(task_id)
    return task_id


@dataclass(frozen=True)
class Candidate:
    """A candidate ready to be checked: its commit, its test files (path, bytes), the test modules among them, and
    the task id it gets if accepted (taken in history order, so ids do not depend on which check ends first)."""

    commit: Commit
    files: list[tuple[str, bytes]]
    modules: list[str]
    task_id: str


def prepare(context: Context, commit: Commit) -> Candidate:
    """The candidate's test files and task id, or Rejected when its test changes hold no test module to run."""
    files, modules = oracle_files(context.reader, commit)
    return Candidate(commit, files, modules, _task_id(context, commit))


def evaluate(context: Context, candidate: Candidate) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the task, its report entry) for a candidate, or Rejected. A rejected candidate leaves nothing behind."""
    started = time.monotonic()
    commit, files, modules, task_id = candidate.commit, candidate.files, candidate.modules, candidate.task_id
    try:
        refs = history.task_refs(context.reader, commit, context.namespace, task_id)
    except (repo.GitError, MiningError) as exc:
        raise Rejected("git-error", str(exc)) from exc
    oracle_root = context.options.out / ORACLE_FOLDER / task_id
    accepted = False
    try:
        patch = _solution_patch(context.reader, refs)
        _check_replay(context.reader, refs, patch)
        probed = judge_runs(context.test_command, modules, _probe(context, refs, files, modules))
        oracle_command = probe.overlay_command(context.test_command, probed.oracle_arguments)
        if len(oracle_command.encode()) > MAX_ORACLE_COMMAND_BYTES:
            raise Rejected("command-too-long", f"the oracle command would be {len(oracle_command)} bytes")
        for path, payload in files:
            suitefiles.write_file(oracle_root / path, payload)
        task = {
            "id": task_id,
            "class": task_class(commit, patch),
            "repo": suitefiles.shown_path(context.options.repo),
            "ref": refs.base_ref,
            "prompt": prompts.message_text(commit.subject, commit.body),
            "verify": probed.verify,
            "verify_on_base": "pass",
            "oracle": {
                "command": oracle_command,
                "files": [{"source": f"{ORACLE_FOLDER}/{task_id}/{path}", "target": path} for path, _ in files],
            },
            "solution": {"ref": refs.solution_ref},
        }
        check_again(task, context.options.out / suitefiles.TASKS_FILE, context.config)
        prompt = _prompt(context, commit, refs, probed, task_id)
        if len(prompt.split()) < MIN_PROMPT_WORDS:
            raise Rejected("prompt-too-short", f"{prompt.strip()!r} says too little to act on")
        leaks = prompts.leaked_lines(prompt, patch)
        if leaks:
            raise Rejected("prompt-leaked-fix", f"the prompt quotes the solution's line {leaks[0][:100]!r}")
        task["prompt"] = prompt
        accepted = True
        entry = {
            "id": task_id,
            "commit": commit.sha,
            "subject": commit.subject,
            "class": task["class"],
            "fail_to_pass": len(probed.fail_to_pass),
            "pass_to_pass": len(probed.pass_to_pass),
            "seconds": round(time.monotonic() - started, 1),
        }
        return task, entry
    finally:
        if not accepted:
            history.withdraw(context.reader.layout.common_dir, refs)
            shutil.rmtree(oracle_root, ignore_errors=True)
            shutil.rmtree(context.options.out / SESSIONS_FOLDER / task_id, ignore_errors=True)


def _agent_install(config: dict[str, Any], prompt_mode: str) -> AgentInstall | None:
    if prompt_mode != "agent":
        return None
    agent = agents.DEFAULT_ADAPTER
    return agent.install(environment.resolve_cli(environment.configured_cli(config, agent), agent=agent))


@dataclass
class Tally:
    """A mining run's results so far: written after every accepted task, so an interrupted run keeps them."""

    tasks: list[dict[str, Any]]
    entries: list[dict[str, Any]]
    rejections: list[dict[str, Any]]
    scanned: int = 0
    candidates: int = 0


def save(context: Context, tally: Tally, *, origin: str, wall_s: float, skillbench_command: str) -> dict[str, Any]:
    """Write the suite (when it has a task) and the report as they stand; return the report document."""
    options = context.options
    experiment_path = options.out / suitefiles.EXPERIMENT_FILE
    if tally.tasks:
        experiment_path = suitefiles.write_suite(
            options.out,
            origin=origin,
            tasks=tally.tasks,
            script_tasks={task["id"]: {"replay": replay.REPLAY_SOLUTION} for task in tally.tasks},
            experiment=suitefiles.experiment_document(options.out, f"mined-{context.namespace}"),
            header=(
                f"Mined by `skillbench tasks mine` from {options.repo}: {len(tally.tasks)} task(s) of "
                f"{tally.candidates} candidate commit(s).\nEach task: base = refs/skillbench/{context.namespace}/"
                "<task>/base in that repository, solution = …/solution, hidden oracle = the commit's tests "
                "(oracles/<task>/), verify = pass-to-pass tests.\nSee mining-report.md for every rejection and its "
                "reason."
            ),
        )["experiment"]
    document = report.report_document(
        options={
            "repository": str(options.repo),
            "since": options.since,
            "until": options.until,
            "prompt": options.prompt,
            "test_command": context.test_command,
            "max": options.max_tasks,
            "paths": list(options.paths),
        },
        scanned=tally.scanned,
        candidates=tally.candidates,
        tasks=tally.entries,
        rejections=tally.rejections,
        wall_s=wall_s,
        commands=suitefiles.commands(experiment_path, skillbench_command),
    )
    options.out.mkdir(parents=True, exist_ok=True)
    report.write_report(options.out, document)
    return document


def _screen(commit: Commit) -> str | None:
    """Why a commit is not a candidate at all, or None."""
    if commit.parent is None:
        return "root-commit"
    if not commit.tests:
        return "no-test-change"
    if not commit.source:
        return "no-source-change"
    return None


def _walk(
    context: Context,
    tally: Tally,
    commits: list[str],
    *,
    origin: str,
    started: float,
    now: Callable[[], float],
    command: str,
) -> None:
    """Check the candidates newest first, up to `--jobs` at a time, and take their outcomes in history order, so the
    suite, the report and the task ids are those of a one-at-a-time run. No more candidates are in flight than
    accepted tasks may still be added under `--max`, so none is checked only to be thrown away."""
    options, log = context.options, context.log
    remaining = iter(commits)
    # In history order: (commit, why it is no candidate | a candidate's outcome | its check in flight).
    queue: deque[tuple[Commit, str | Rejected | Future[tuple[dict[str, Any], dict[str, Any]]]]] = deque()
    in_flight = 0

    def top_up(pool: ThreadPoolExecutor) -> None:
        nonlocal in_flight
        while in_flight < options.jobs and (
            options.max_tasks is None or len(tally.tasks) + in_flight < options.max_tasks
        ):
            sha = next(remaining, None)
            if sha is None:
                return
            commit = history.read_commit(context.reader, sha, options.paths)
            reason = _screen(commit)
            if reason:
                queue.append((commit, reason))
                continue
            try:
                candidate = prepare(context, commit)
            except Rejected as rejected:
                queue.append((commit, rejected))
                continue
            queue.append((commit, pool.submit(evaluate, context, candidate)))
            in_flight += 1

    with ThreadPoolExecutor(max(1, options.jobs), thread_name_prefix="mine") as pool:
        top_up(pool)
        while queue:
            if options.max_tasks is not None and len(tally.tasks) >= options.max_tasks:
                break
            commit, outcome = queue.popleft()
            tally.scanned += 1
            if isinstance(outcome, str):
                tally.rejections.append(
                    {"commit": commit.sha, "subject": commit.subject, "reason": outcome, "detail": ""}
                )
                top_up(pool)
                continue
            tally.candidates += 1
            try:
                if isinstance(outcome, Rejected):
                    raise outcome
                in_flight -= 1
                task, entry = outcome.result()
            except Rejected as rejected:
                tally.rejections.append(
                    {
                        "commit": commit.sha,
                        "subject": commit.subject,
                        "reason": rejected.reason,
                        "detail": rejected.detail,
                    }
                )
                print(f"[mine] {commit.short} rejected ({rejected.reason}): {rejected.detail[:160]}", file=log)
                top_up(pool)
                continue
            tally.tasks.append(task)
            tally.entries.append(entry)
            print(f"[mine] {commit.short} accepted as {task['id']} ({len(tally.tasks)} so far)", file=log)
            save(context, tally, origin=origin, wall_s=now() - started, skillbench_command=command)
            top_up(pool)


def mine(
    options: MineOptions,
    config: dict[str, Any],
    *,
    skillbench_command: str,
    log: TextIO | None = None,
    api_key: str | None = None,
    now: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Mine `options.repo` into `options.out`; return the report document (also written beside the suite, and after
    every accepted task, so an interrupted run keeps what it accepted)."""
    started = now()
    log = log or sys.stderr
    history.check_repository(options.repo)
    origin = f"mine:{options.repo.expanduser().resolve()}"
    suitefiles.claim(options.out, origin)
    tally = Tally(tasks=[], entries=[], rejections=[])
    with repo.open_target(options.repo) as reader:
        warning = history.dirty_warning(reader)
        if warning:
            print(warning, file=log)
        try:
            commits = history.first_parent_commits(reader, since=options.since, until=options.until)
        except repo.TargetRepositoryError as exc:
            raise MiningError(f"--since/--until: {exc}") from exc
        context = Context(
            options=options,
            config=config,
            reader=reader,
            namespace=suitefiles.slug(options.out.resolve().name),
            test_command=options.test_command or default_test_command(reader),
            agent_install=_agent_install(config, options.prompt),
            api_key=api_key,
            log=log,
            taken_ids=set(),
        )
        _walk(context, tally, commits, origin=origin, started=started, now=now, command=skillbench_command)
    if not tally.candidates:
        raise MiningError(
            f"--repo {options.repo}: none of the {tally.scanned} commit(s) in the range "
            f"{options.since or 'the first commit'}..{options.until or 'HEAD'} changes both source and test files "
            "(tests: files under tests/, test/ or testing/, or named test_*.py, *_test.py, conftest.py); widen the "
            "range with --since/--until, or name the source files with --paths"
        )
    return save(context, tally, origin=origin, wall_s=now() - started, skillbench_command=skillbench_command)


__all__ = ["ArtifactError", "MineOptions", "MiningError", "mine"]
