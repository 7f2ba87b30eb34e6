"""The task miner's parts that need no sandbox: history, refs in the user's repository, the probe's reading of
pytest, the judgement of a candidate's runs, prompts that must not show the fix, the suite folder, the report,
and the command's refusals of bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import minerepo
import pytest
from skillbench import cli
from skillbench.base.artifacts import validate
from skillbench.execution import repo
from skillbench.tasksupply import history, miner, probe, prompts, report, suitefiles
from skillbench.tasksupply.history import MiningError


@pytest.fixture(scope="module")
def statkit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("mine") / "statkit"
    return root, minerepo.make_history(root)


def user_state(repo_path: Path) -> dict[str, str]:
    """What the miner must never change: branches, HEAD, the index, the work tree."""
    return {
        "branches": minerepo.git(repo_path, "for-each-ref", "refs/heads", "refs/tags"),
        "head": minerepo.git(repo_path, "rev-parse", "HEAD"),
        "index": (repo_path / ".git" / "index").read_bytes().hex(),
        "status": minerepo.git(repo_path, "status", "--porcelain", "--untracked-files=all"),
    }


def test_test_and_source_files_are_told_apart() -> None:
    assert history.is_test_path("tests/test_core.py") and history.is_test_path("pkg/tests/data/x.json")
    assert history.is_test_path("test_thing.py") and history.is_test_path("src/thing_test.py")
    assert history.is_test_path("conftest.py")
    assert history.is_source_path("pkg/core.py") and not history.is_source_path("README.md")
    assert not history.is_source_path("pkg/core.py", ["other/*.py"])


def test_commits_are_sorted_into_source_tests_and_the_rest(statkit: tuple[Path, dict[str, str]]) -> None:
    root, commits = statkit
    with repo.open_target(root) as reader:
        walked = history.first_parent_commits(reader, since=None, until=None)
        fix = history.read_commit(reader, commits["round-half"])
        docs = history.read_commit(reader, commits["docs"])
        first = history.read_commit(reader, commits["initial"])
    assert walked[0] == commits["round-half"] and walked[-1] == commits["initial"]
    assert [change.path for change in fix.source] == ["statkit/core.py"]
    assert [change.path for change in fix.tests] == ["tests/test_core.py"]
    assert not docs.tests and [change.path for change in docs.other] == ["README.md"]
    assert first.parent is None


def test_task_refs_leave_branches_index_and_work_tree_alone_and_withdraw_leaves_nothing(
    statkit: tuple[Path, dict[str, str]],
) -> None:
    root, commits = statkit
    before = user_state(root)
    packs = set((root / ".git" / "objects" / "pack").glob("*"))
    with repo.open_target(root) as reader:
        commit = history.read_commit(reader, commits["round-half"])
        refs = history.task_refs(reader, commit, "unit", "round-half")
    assert user_state(root) == before
    assert minerepo.git(root, "rev-parse", refs.base_ref) == refs.base
    # The base has neither the fix nor the new test; the solution has the fix and still not the test.
    base_core = minerepo.git(root, "show", f"{refs.base}:statkit/core.py")
    solution_core = minerepo.git(root, "show", f"{refs.solution}:statkit/core.py")
    assert "// len(values)" in base_core and "/ len(values)" in solution_core and "//" not in solution_core
    for sha in (refs.base, refs.solution):
        assert "fractional" not in minerepo.git(root, "show", f"{sha}:tests/test_core.py")
    assert minerepo.git(root, "diff", "--name-only", refs.base, refs.solution) == "statkit/core.py"
    history.withdraw(root / ".git", refs)
    assert not minerepo.git(root, "for-each-ref", "refs/skillbench")
    assert set((root / ".git" / "objects" / "pack").glob("*")) == packs
    assert user_state(root) == before


SUMMARY = """\
...F
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::test_param[1-2]
FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
FAILED tests/test_b.py::test_three - ImportError: cannot import name 'clamp'
ERROR tests/test_c.py - ModuleNotFoundError: No module named 'nope'
ERROR tests/test_a.py::test_one - RuntimeError: teardown
XFAIL tests/test_a.py::test_later - not yet
SKIPPED [1] tests/test_a.py:9: no network
=================== 2 failed, 2 passed, 1 error in 0.10s ====================
"""


def test_the_probe_reads_per_test_outcomes_from_pytests_summary() -> None:
    run = probe.parse_summary("PASSED early noise\n" + SUMMARY)
    assert run.passed == {"tests/test_a.py::test_param[1-2]"}  # test_one errored in teardown: not a pass
    assert run.outcomes["tests/test_a.py::test_two"] == "failed"
    assert run.outcomes["tests/test_a.py::test_later"] == "xfail"
    assert run.collection_errors == {"tests/test_c.py": "ModuleNotFoundError: No module named 'nope'"}
    assert probe.import_only("tests/test_b.py::test_three", run)
    assert probe.import_only("tests/test_c.py::test_x", run)
    assert not probe.import_only("tests/test_a.py::test_two", run)


def test_the_oracle_command_lays_the_tests_over_a_copy_of_the_workspace() -> None:
    command = probe.overlay_command("python3 -m pytest", ["tests/test_a.py::test_param[1-2]"])
    assert "--exclude=./.git" in command and '"$SKILLBENCH_ORACLE_ROOT"/.' in command
    assert command.endswith("--rootdir=. 'tests/test_a.py::test_param[1-2]'")


def run_of(outcomes: dict[str, str], **extra: object) -> probe.TestRun:
    return probe.TestRun(outcomes=dict(outcomes), **extra)  # type: ignore[arg-type]


def runs(base: dict[str, str], solution: dict[str, str], suite: dict[str, str] | None = None, **base_extra: object):
    suite = suite if suite is not None else {"tests/test_old.py::test_kept": "passed"}
    return {
        "suite-on-base": run_of(suite),
        "suite-on-solution": run_of(suite),
        "oracle-on-base": run_of(base, **base_extra),
        "oracle-on-solution": run_of(solution),
    }


def test_fail_to_pass_tests_make_the_oracle_and_pass_to_pass_tests_the_verify() -> None:
    judged = miner.judge_runs(
        "python3 -m pytest",
        ["tests/test_new.py"],
        runs(
            {"tests/test_new.py::test_fixed": "failed", "tests/test_new.py::test_same": "passed"},
            {"tests/test_new.py::test_fixed": "passed", "tests/test_new.py::test_same": "passed"},
        ),
    )
    assert judged.fail_to_pass == ["tests/test_new.py::test_fixed"]
    assert judged.oracle_arguments == ["tests/test_new.py"]  # every test of the module passes on the solution
    assert judged.verify.endswith("tests/test_old.py") and judged.pass_to_pass == ["tests/test_old.py::test_kept"]


def test_a_test_that_fails_on_the_solution_too_is_left_out_of_the_oracle() -> None:
    judged = miner.judge_runs(
        "python3 -m pytest",
        ["tests/test_new.py"],
        runs(
            {"tests/test_new.py::test_fixed": "failed", "tests/test_new.py::test_env": "failed"},
            {"tests/test_new.py::test_fixed": "passed", "tests/test_new.py::test_env": "failed"},
        ),
    )
    assert judged.oracle_arguments == ["tests/test_new.py::test_fixed"]


def test_verify_deselects_the_tests_of_its_files_that_are_not_pass_to_pass() -> None:
    suite = {"tests/test_old.py::test_kept": "passed", "tests/test_old.py::test_broken": "failed"}
    judged = miner.judge_runs(
        "python3 -m pytest",
        ["tests/test_new.py"],
        runs({"tests/test_new.py::t": "failed"}, {"tests/test_new.py::t": "passed"}, suite),
    )
    assert "--deselect tests/test_old.py::test_broken" in judged.verify


@pytest.mark.parametrize(
    ("base", "solution", "suite", "extra", "reason"),
    [
        ({"tests/test_new.py::t": "passed"}, {"tests/test_new.py::t": "passed"}, None, {}, "no-fail-to-pass"),
        (
            {},
            {"tests/test_new.py::t": "passed"},
            None,
            {"collection_errors": {"tests/test_new.py": "x"}},
            "only-collection-errors",
        ),
        (
            {"tests/test_new.py::t": "failed"},
            {"tests/test_new.py::t": "passed"},
            None,
            {"messages": {"tests/test_new.py::t": "ImportError: cannot import name 'clamp'"}},
            "only-collection-errors",
        ),
        ({"tests/test_new.py::t": "failed"}, {"tests/test_new.py::t": "passed"}, {}, {}, "no-pass-to-pass"),
        ({}, {}, None, {}, "does-not-run"),
        ({"tests/test_new.py::t": "failed"}, {"tests/test_new.py::t": "passed"}, None, {"state": "timeout"}, "timeout"),
    ],
)
def test_a_candidate_is_rejected_with_its_reason(base, solution, suite, extra, reason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(miner.Rejected) as caught:
        miner.judge_runs("python3 -m pytest", ["tests/test_new.py"], runs(base, solution, suite, **extra))
    assert caught.value.reason == reason


def test_a_candidate_with_nothing_to_fix_is_rejected_from_its_own_tests_alone() -> None:
    # The probe judges the commit's tests before it runs the project's suite: no suite run is needed to reject.
    passing = run_of({"tests/test_new.py::t": "passed"})
    with pytest.raises(miner.Rejected) as caught:
        miner.judge_oracle(["tests/test_new.py"], passing, passing)
    assert caught.value.reason == "no-fail-to-pass"
    fixed = miner.judge_oracle(["tests/test_new.py"], run_of({"tests/test_new.py::t": "failed"}), passing)
    assert fixed == (["tests/test_new.py::t"], ["tests/test_new.py"])


def walk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, jobs: int, max_tasks: int | None, accept: set[str]):
    """`_walk` over commits c0 (newest) … c7 whose checks end in reverse order; which were checked, and the tally."""
    import threading
    import time

    shas = [f"c{index}" for index in range(8)]
    screened = {"c2"}  # no test change: never a candidate
    checked: list[str] = []
    lock = threading.Lock()
    live = {"now": 0, "most": 0}

    def read_commit(_reader, sha, _paths):  # type: ignore[no-untyped-def]
        tests = [] if sha in screened else [history.FileChange("tests/test_a.py", "", "1", "", "2")]
        return history.Commit(sha=sha, parent="p", subject=f"subject {sha}", body="", source=["x"], tests=tests)  # type: ignore[list-item]

    def evaluate(_context, candidate):  # type: ignore[no-untyped-def]
        with lock:
            live["now"] += 1
            live["most"] = max(live["most"], live["now"])
            checked.append(candidate.commit.sha)
        time.sleep(0.05 * (8 - int(candidate.commit.sha[1:])) / 8)  # older commits finish first
        with lock:
            live["now"] -= 1
        if candidate.commit.sha in accept:
            return {"id": candidate.task_id}, {"id": candidate.task_id}
        raise miner.Rejected("no-fail-to-pass", "nothing to fix")

    monkeypatch.setattr(history, "read_commit", read_commit)
    monkeypatch.setattr(miner, "prepare", lambda context, commit: miner.Candidate(commit, [], [], commit.sha + "-t"))
    monkeypatch.setattr(miner, "evaluate", evaluate)
    monkeypatch.setattr(miner, "save", lambda *args, **kwargs: {})
    options = miner.MineOptions(repo=tmp_path, out=tmp_path / "out", max_tasks=max_tasks, jobs=jobs)
    context = miner.Context(options, {}, None, "ns", "pytest", None, None, __import__("io").StringIO(), set())  # type: ignore[arg-type]
    tally = miner.Tally(tasks=[], entries=[], rejections=[])
    miner._walk(context, tally, shas, origin="o", started=0.0, now=lambda: 0.0, command="skillbench")
    return checked, tally, live["most"]


def test_candidates_checked_at_once_are_reported_in_history_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    one = walk(monkeypatch, tmp_path, jobs=1, max_tasks=None, accept={"c1", "c4", "c6"})
    three = walk(monkeypatch, tmp_path, jobs=3, max_tasks=None, accept={"c1", "c4", "c6"})
    assert three[2] == 3 and one[2] == 1  # three checks ran at once
    for _checked, tally, _most in (one, three):
        assert [task["id"] for task in tally.tasks] == ["c1-t", "c4-t", "c6-t"]
        assert [item["commit"] for item in tally.rejections] == ["c0", "c2", "c3", "c5", "c7"]
        assert (tally.scanned, tally.candidates) == (8, 7)


def test_no_candidate_is_checked_only_to_be_thrown_away_under_max(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checked, tally, most = walk(monkeypatch, tmp_path, jobs=4, max_tasks=2, accept={"c0", "c1", "c3"})
    # c0 and c1 fill --max 2: with two accepted tasks possible, no more than two checks were ever in flight.
    assert [task["id"] for task in tally.tasks] == ["c0-t", "c1-t"] and checked == ["c0", "c1"] and most == 2
    assert (tally.scanned, tally.candidates, tally.rejections) == (2, 2, [])


def test_a_commit_message_prompt_drops_trailers() -> None:
    text = prompts.message_text("Fix the sum", "It was wrong.\n\nSigned-off-by: A <a@a>\nCo-authored-by: B <b@b>")
    assert text == "Fix the sum\n\nIt was wrong.\n"


def test_a_prompt_that_quotes_an_added_line_leaks_the_fix() -> None:
    patch = (
        b"--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n-    return max(values) - max(values)\n"
        b"+    return max(values) - min(values)\n+    x = 1\n     moved_line_here = True\n"
        b"-        also_moved = compute(things)\n+    also_moved = compute(things)\n"
    )
    assert prompts.leaked_lines("It now does: return max(values)  - min(values).", patch) == [
        "return max(values) - min(values)"
    ]
    assert prompts.leaked_lines("x = 1 is fine; also_moved = compute(things) is old code", patch) == []


def test_a_fragment_of_prose_a_docstring_wraps_is_no_leak_but_a_sentence_or_code_is() -> None:
    patch = (
        b"--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,4 @@\n+    It will be removed in a future\n+       major release.\n"
        b"+        raise ValueError\n"
    )
    changelog = "callback_iter is deprecated. It will be removed in a future major release. It should raise ValueError."
    assert prompts.leaked_lines(changelog, patch) == ["It will be removed in a future", "raise ValueError"]
    assert prompts.leaked_lines("Deprecated: to go in the next major release.", patch) == []


def test_an_out_folder_holding_another_suite_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "tasks.yaml").write_text("tasks: []\n")
    with pytest.raises(suitefiles.SuiteFolderError, match="already holds a suite skillbench did not make"):
        suitefiles.claim(tmp_path, "mine:/somewhere")
    (tmp_path / suitefiles.MARKER).write_text(json.dumps({"origin": "mine:/other"}))
    with pytest.raises(suitefiles.SuiteFolderError, match="made from mine:/other"):
        suitefiles.claim(tmp_path, "mine:/somewhere")
    suitefiles.claim(tmp_path, "mine:/other")  # the same origin may be written again
    assert (tmp_path / "tasks.yaml").read_text() == "tasks: []\n"


def test_the_report_validates_and_closes_with_the_commands(tmp_path: Path) -> None:
    document = report.report_document(
        options={
            "repository": "lib",
            "since": "v1",
            "until": None,
            "prompt": "agent",
            "test_command": "python3 -m pytest",
            "max": 20,
            "paths": [],
        },
        scanned=10,
        candidates=4,
        tasks=[
            {
                "id": "t",
                "commit": "a" * 40,
                "subject": "s",
                "class": "trivial",
                "fail_to_pass": 1,
                "pass_to_pass": 3,
                "seconds": 12.0,
            }
        ],
        rejections=[
            {"commit": "b" * 40, "subject": "x | y", "reason": "flaky", "detail": "passed, then failed"},
            {"commit": "c" * 40, "subject": "docs", "reason": "no-test-change", "detail": ""},
        ],
        wall_s=30.0,
        commands={"check": "skillbench check --configfile s/experiment.yaml", "estimate": "skillbench estimate …"},
    )
    validate(document, "mining-report")
    written = report.write_report(tmp_path, document)
    text = written.read_text()
    assert "| 10 | 4 | 1 | 30 s | 30 s |" in text and "x \\| y" in text
    assert text.rstrip().splitlines()[-1].startswith("Next: `skillbench check --configfile s/experiment.yaml`")
    assert document["reasons"] == {"flaky": 1, "no-test-change": 1}


def mine(*args: str) -> int:
    return cli.main(["tasks", "mine", *args])


def test_a_folder_that_is_not_a_repository_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mine("--repo", str(tmp_path), "--out", str(tmp_path / "suite"), "--prompt", "commit-message") == 1
    err = capsys.readouterr().err
    assert f"--repo {tmp_path}" in err and "not a git repository" in err


def test_a_shallow_clone_is_refused(statkit, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    root, _ = statkit
    shallow = tmp_path / "shallow"
    minerepo.git(tmp_path, "clone", "-q", "--depth", "2", f"file://{root}", str(shallow))
    assert mine("--repo", str(shallow), "--out", str(tmp_path / "suite")) == 1
    err = capsys.readouterr().err
    assert "shallow clone" in err and "git fetch --unshallow" in err


def test_a_range_without_a_qualifying_commit_is_refused_and_a_dirty_tree_warned(
    statkit,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    root, commits = statkit
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "README.md").write_text("edited but not committed\n")
    out = tmp_path / "suite"
    code = mine("--repo", str(copy), "--out", str(out), "--since", commits["clamp-feature"], "--until", commits["docs"])
    err = capsys.readouterr().err
    assert code == 1
    assert "uncommitted change(s) (README.md)" in err and "mining reads commits" in err
    assert "none of the 1 commit(s)" in err and "changes both source and test files" in err
    assert not out.exists()


def test_mining_into_a_folder_of_another_suite_writes_nothing(
    statkit,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    root, _ = statkit
    out = tmp_path / "suite"
    out.mkdir()
    (out / "tasks.yaml").write_text("tasks: [hand-written]\n")
    assert mine("--repo", str(root), "--out", str(out)) == 1
    assert "already holds a suite skillbench did not make" in capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == ["tasks.yaml"]


def test_history_errors_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(MiningError, match="--repo"):
        history.check_repository(tmp_path / "missing")


def test_estimate_says_how_many_tasks_a_design_needs() -> None:
    from skillbench.decision import gate
    from skillbench.reporting import progress

    common = {
        "saving_pct": 15.0,
        "run_variance": 0.094,
        "spend_efficiency": 1.0,
        "shared_sd": 0.0,
        "policy": gate.resolve_policy({}),
        "generation": 0,
    }
    three = progress.tasks_needed(**common, runs=3)
    ten = progress.tasks_needed(**common, runs=10)
    assert three is not None and ten is not None
    assert three["power"] >= 0.8 and ten["tasks"] <= three["tasks"]
    fewer = progress.tasks_needed(**common, runs=3, max_tasks=three["tasks"] - 1)
    assert fewer is None  # one task fewer does not reach 80 % power


def test_a_replayed_task_needs_a_reference_solution(tmp_path: Path) -> None:
    from skillbench.base.artifacts import ArtifactError
    from skillbench.experiment import configcheck

    script = tmp_path / "model-script.yaml"
    script.write_text(
        "schema: model-script/v1\ndefaults:\n  usage: {input_tokens: 1, output_tokens: 1, cache_read_input_tokens: 0,"
        " cache_creation_input_tokens: 0}\n  final_text: Done.\n"
        "tasks:\n  a: {replay: solution}\n  b: {replay: solution}\n"
    )
    common = {
        "suite_tasks": ["a", "b"],
        "selected_tasks": ["a", "b"],
        "arm_roles": {"baseline": ["baseline"]},
        "selected_arms": ["baseline"],
        "needs_proposer": False,
    }
    assert configcheck.check_model_script(script, **common, replayable=["a", "b"])["tasks"]["a"] == {
        "replay": "solution"
    }
    with pytest.raises(ArtifactError, match="task `b`: `replay: solution` needs the task's reference"):
        configcheck.check_model_script(script, **common, replayable=["a"])
