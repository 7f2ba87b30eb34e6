"""`skillbench apply`: evidence-bound, all-or-nothing promotion of a frozen overlay into a real git repository."""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from skillbench.base import artifacts
from skillbench.decision import gate
from skillbench.evolution import apply
from skillbench.evolution.apply import (
    ApplyError,
    apply_promotion,
    committed_target_digests,
    format_applied,
    load_config,
    validate_promotion_for_apply,
)
from skillbench.execution import repo
from skillbench.experiment import overlay, overlayreview

MODEL = "claude-sonnet-4-20250514"
GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NOW = GENERATED_AT + timedelta(days=1)
PAIRS = [("workflow", "candidate_workflow"), ("workflow_direct", "candidate_workflow_direct")]
INCUMBENT = {"SKILL.md": b"# change-work\nincumbent steps\n", "reference.md": b"incumbent reference\n"}
CANDIDATE = {"SKILL.md": b"# change-work\ncandidate steps, shorter\n", "reference.md": b"candidate reference\n"}
TARGETS = [
    ".claude/skills/change-work/SKILL.md",
    "plugin/skills/change-work/SKILL.md",
    ".claude/skills/change-work/reference.md",
    "plugin/skills/change-work/reference.md",
]
CONFIG_YAML = f"""
experiment: demo
model:
  name: {MODEL}
  effort: high
# Both candidate pairs (the workflow's own config, which the CLI layers under this one, selects fewer arms).
selected_arms: [workflow, workflow_direct, baseline]
skills:
  root: .claude/skills
  evolvable: [change-plan, change-work]
  mirrors: [plugin/skills]
gate:
  min_improvement_pct: {{min_improvement}}
evolution:
  accept_flags: {{accept_flags}}
"""


# ─── Fixtures ───────────────────────────────────────────────────────────────


def git(repository: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *repo.SAFE_GIT_CONFIG, "-C", str(repository), *args],
        env=repo.git_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def config_text(min_improvement: float = 5.0, accept_flags: tuple[str, ...] = ()) -> str:
    return CONFIG_YAML.format(min_improvement=min_improvement, accept_flags=json.dumps(list(accept_flags)))


def write_config(
    tmp_path: Path, *, min_improvement: float = 5.0, model: str = MODEL, accept_flags: tuple[str, ...] = ()
) -> dict:
    path = tmp_path / f"config-{min_improvement}-{model}-{'-'.join(accept_flags)}.yaml"
    path.write_text(config_text(min_improvement, accept_flags).replace(MODEL, model), encoding="utf-8")
    return load_config(path)


def task_binding() -> dict:
    return artifacts.validate(
        {
            "schema": "task-binding/v1",
            "id": "t1",
            "class": "demo",
            "expensive": False,
            "target": "snapshot:t1",
            "ref": "HEAD",
            "resolved_sha": "1" * 40,
            "sanitized_sha": "2" * 40,
            "prompt_digest": "3" * 64,
            "setup_digest": "4" * 64,
            "verify_digest": "5" * 64,
            "oracle_digest": "6" * 64,
            "oracle_command_digest": "7" * 64,
            "oracle_manifest_digest": "8" * 64,
            "oracle_files": [{"target": "test_hidden.py", "sha256": "9" * 64, "size": 42}],
        },
        "task-binding",
    )


def result_row(arm: str, run: int, cost: float, overlay_digest: str, task: str = "t1") -> dict:
    return artifacts.validate(
        {
            "schema": "result-row/v1",
            "task": task,
            "class": "demo",
            "run": run,
            "arm": arm,
            "ok": True,
            "resolved": True,
            "authored_tests_passed": True,
            "authored_test_output": "",
            "verify_output": "",
            "oracle_passed": True,
            "oracle_output": "hidden oracle passed",
            "error_kind": None,
            "error_detail": None,
            "evidence_diagnostics": [],
            "input_tokens": 1000,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 100,
            "cost_usd": cost,
            "cli_cost_usd": None,
            "cost_check": None,
            "duration_s": 10.0,
            "num_turns": 5,
            "session_ids": [f"{arm}-{run}"],
            "transcript_artifacts": [],
            "transcript_missing": False,
            "skill_invoked": True,
            "tool_use_counts": {},
            "plan_produced": True,
            "diff_files": 1,
            "diff_insertions": 3,
            "diff_deletions": 1,
            "model": MODEL,
            "effort": "high",
            "provider": "scripted",
            "agent": "claude-code",
            "cli_version": "2.0.0",
            "offered_skills": None,
            "task_ref": "HEAD",
            "task_base_sha": "1" * 40,
            "sanitized_task_sha": "2" * 40,
            "variant_head_sha": "3" * 40,
            "task_prompt_digest": "3" * 64,
            "skill_digest": "a" * 64,
            "candidate_overlay_digest": overlay_digest if arm.startswith("candidate_") else None,
            "oracle_digest": "6" * 64,
            "oracle_command_digest": "7" * 64,
            "oracle_manifest_digest": "8" * 64,
            "sandbox_backend": "bwrap",
            "recorded_at": "2026-03-01T11:00:00Z",
        },
        "result-row",
    )


def promotion(
    config: dict,
    digest: str,
    base_digests: dict,
    *,
    candidate_cost: float = 0.8,
    generated_at: datetime = GENERATED_AT,
    flags: list | None = None,
) -> dict:
    rows = []
    # Sixteen tasks × three runs, with run-to-run noise: evidence the default gate can promote on.
    noise = [1.0, 1.1, 0.92, 1.05, 0.96]
    for incumbent, candidate in PAIRS:
        for index in range(16):
            for run in range(3):
                rows += [
                    result_row(incumbent, run, noise[run], digest, task=f"t{index:02d}"),
                    result_row(candidate, run, candidate_cost * noise[(run + index) % 5], digest, task=f"t{index:02d}"),
                ]
    binding = {
        "benchmark_model": MODEL,
        "effort": "high",
        "proposer_model": None,
        "candidate_origin": "manual-initial-overlay",
        "candidate_overlay_digest": digest,
        "required_candidate_arms": [candidate for _, candidate in PAIRS],
        "selected_tasks": [task_binding()],
        "target_base_digests": base_digests,
    }
    document = gate.promotion_document(
        rows,
        pairs=PAIRS,
        policy=gate.resolve_policy(config["gate"]),
        binding=binding,
        run_status="complete",
        generated_at=generated_at,
        content_flags=flags,
        accept_flags=config["evolution"]["accept_flags"],
    )
    return artifacts.validate(document, "promotion")


class Experiment:
    def __init__(self, tmp_path: Path, candidate: dict[str, bytes] = CANDIDATE, accept_flags: tuple[str, ...] = ()):
        self.tmp = tmp_path
        self.repository = tmp_path / "repo"
        for tree in (".claude/skills/change-work", "plugin/skills/change-work"):
            folder = self.repository / tree
            folder.mkdir(parents=True)
            for name, content in INCUMBENT.items():
                (folder / name).write_bytes(content)
        (self.repository / "plugin/skills/change-work/reference.md").chmod(0o600)
        git(self.repository, "init", "--quiet")
        git(self.repository, "add", "--all")
        git(self.repository, "commit", "--quiet", "-m", "incumbent skills")
        self.head = git(self.repository, "rev-parse", "HEAD").strip()

        self.config = write_config(tmp_path, accept_flags=accept_flags)
        source = tmp_path / "candidate" / ".claude" / "skills" / "change-work"
        source.mkdir(parents=True)
        for name, content in candidate.items():
            (source / name).write_bytes(content)

        self.results = tmp_path / "results" / "demo"
        artifacts.write_artifact(
            self.results / "tasks" / "bindings.json",
            {
                "schema": "task-bindings/v1",
                "suite": "tasks/demo/tasks.yaml",
                "tasks": [task_binding()],
                "skipped_expensive": [],
            },
            "task-bindings",
        )
        self.gen = self.results / "gen0"
        self.frozen = self.gen / "frozen-overlay"
        evolvable = self.config["skills"]["evolvable"]
        self.digest = overlay.freeze(tmp_path / "candidate", self.frozen, evolvable)
        files = overlay.overlay_files(self.frozen, evolvable)
        targets = overlay.promotion_targets(files, skills_root=".claude/skills", mirrors=["plugin/skills"])
        assert targets == TARGETS
        self.base_digests = committed_target_digests(self.repository, targets)
        # What freeze_overlay records: the content review against the incumbent, here without task tools.
        incumbent = overlayreview.incumbent_files(files, self.repository / ".claude" / "skills")
        self.flags = overlayreview.review_overlay(files, incumbent, []).flags
        diff = overlayreview.overlay_diff(files, incumbent, ".claude/skills")
        artifacts.write_artifact(
            self.gen / "overlay.json",
            {
                "schema": "overlay/v1",
                "generation": 0,
                "candidate_origin": "manual-initial-overlay",
                "source": str(tmp_path / "candidate"),
                "proposer_model": None,
                "digest": self.digest,
                "files": overlay.overlay_summary(files),
                "touched_skills": ["change-work"],
                "required_candidate_arms": [candidate for _, candidate in PAIRS],
                "pairs": [list(pair) for pair in PAIRS],
                "targets": targets,
                "target_base_digests": self.base_digests,
                "content_review": overlayreview.review_record(overlayreview.ContentReview(flags=self.flags), [], diff),
            },
            "overlay",
        )
        self.promotion = promotion(self.config, self.digest, self.base_digests, flags=self.flags)
        self.write_promotion(self.promotion)

    @property
    def journal(self) -> Path:
        return self.repository / ".git" / apply.JOURNAL_NAME

    def write_promotion(self, document: dict, generation: int = 0) -> None:
        artifacts.write_artifact(self.results / f"gen{generation}" / "promotion.json", document, "promotion")

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        paths = {target: self.repository / target for target in TARGETS}
        return {target: (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) for target, path in paths.items()}

    def leftovers(self) -> list[str]:
        return sorted(
            str(path.relative_to(self.repository))
            for path in self.repository.rglob(".skillbench-apply-*")
            if ".git" not in path.parts and not path.name.startswith(apply.RECOVERY_PREFIX)
        )

    def apply(self, **kwargs) -> list[str]:
        kwargs.setdefault("config", self.config)
        kwargs.setdefault("now", NOW)
        return apply_promotion(self.results, repository=self.repository, **kwargs)


@pytest.fixture
def experiment(tmp_path):
    made = Experiment(tmp_path)
    assert [decision["decision"] for decision in made.promotion["decisions"]] == ["promote", "promote"]
    yield made
    if made.frozen.exists():
        artifacts.remove_tree(made.frozen)


def refused(experiment: Experiment, match: str, **kwargs) -> None:
    before = experiment.snapshot()
    with pytest.raises(ApplyError, match=match):
        experiment.apply(**kwargs)
    assert experiment.snapshot() == before
    assert experiment.leftovers() == []
    assert git(experiment.repository, "rev-parse", "HEAD").strip() == experiment.head


# ─── Success ────────────────────────────────────────────────────────────────


def test_applies_canonical_and_mirror_files_without_committing(experiment):
    modes = {target: mode for target, (_, mode) in experiment.snapshot().items()}
    # A later generation that did not promote is skipped in favour of the promoted gen0.
    keep = copy.deepcopy(experiment.promotion)
    for decision in keep["decisions"]:
        decision["decision"] = "keep_incumbent"
    experiment.write_promotion(keep, generation=1)

    written = experiment.apply()

    assert written == TARGETS
    for target in TARGETS:
        assert (experiment.repository / target).read_bytes() == CANDIDATE[Path(target).name]
    assert {target: mode for target, (_, mode) in experiment.snapshot().items()} == modes
    assert experiment.leftovers() == []
    assert git(experiment.repository, "rev-parse", "HEAD").strip() == experiment.head
    status = sorted(line[3:] for line in git(experiment.repository, "status", "--porcelain").splitlines())
    assert status == sorted(TARGETS)
    assert git(experiment.repository, "diff", "--cached", "--name-only") == ""
    text = format_applied(written)
    assert all(target in text for target in TARGETS) and "nothing was committed" in text


def test_load_config_fills_the_schema_defaults(tmp_path):
    config = write_config(tmp_path)
    assert config["gate"]["metric"] == "cost_usd"
    assert config["gate"]["min_runs"] == 3
    assert config["model"]["effort"] == "high"
    assert "workflow" in config["arms"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("runs: 0\n", encoding="utf-8")
    with pytest.raises(ApplyError, match="does not match"):
        load_config(bad)


# ─── Refusals: every target byte-identical afterwards ───────────────────────


def test_refuses_a_drifted_target(experiment):
    (experiment.repository / "plugin/skills/change-work/SKILL.md").write_bytes(b"edited by hand\n")
    refused(experiment, "differ from HEAD")


def test_refuses_a_target_changed_at_head(experiment):
    mirror = experiment.repository / "plugin/skills/change-work/reference.md"
    mirror.write_bytes(b"committed later\n")
    git(experiment.repository, "commit", "--quiet", "-am", "later change")
    experiment.head = git(experiment.repository, "rev-parse", "HEAD").strip()
    refused(experiment, "target_base_digests|binding mismatch")


def test_refuses_expired_evidence(experiment):
    refused(experiment, "promotion evidence has expired", now=GENERATED_AT + timedelta(days=91))


def test_refuses_future_dated_evidence(experiment):
    refused(experiment, "generated in the future", now=GENERATED_AT - timedelta(hours=1))


def test_accepts_small_clock_skew(experiment):
    assert experiment.apply(now=GENERATED_AT - timedelta(minutes=4)) == TARGETS


def test_refuses_a_tampered_frozen_overlay(experiment):
    frozen_file = experiment.frozen / ".claude/skills/change-work/reference.md"
    frozen_file.chmod(0o600)
    frozen_file.write_bytes(b"sneaky edit\n")
    frozen_file.chmod(0o400)
    refused(experiment, "frozen overlay was tampered with")


def test_refuses_a_changed_policy(experiment, tmp_path):
    refused(experiment, "promotion binding mismatch for policy", config=write_config(tmp_path, min_improvement=10.0))


@pytest.mark.parametrize(("key", "value"), [("review_f1_margin", 0.3), ("trigger_margin_pct", 40.0)])
def test_refuses_a_promotion_that_set_a_margin_the_config_leaves_at_its_default(experiment, key, value):
    document = copy.deepcopy(experiment.promotion)
    document["policy"][key] = value
    experiment.write_promotion(document)
    refused(experiment, f"promotion binding mismatch for policy \\({key}\\)")


def test_refuses_a_changed_model(experiment, tmp_path):
    config = write_config(tmp_path, model="claude-opus-4-20250514")
    refused(experiment, "promotion binding mismatch for benchmark_model", config=config)


def test_refuses_changed_mirrors(experiment):
    config = copy.deepcopy(experiment.config)
    config["skills"]["mirrors"] = []
    refused(experiment, "promotion targets", config=config)


def test_refuses_changed_selected_arms(experiment):
    config = copy.deepcopy(experiment.config)
    config["selected_arms"] = ["workflow", "baseline"]
    refused(experiment, "differ from the candidate arms the current config derives", config=config)


def test_refuses_a_keep_incumbent_decision(experiment):
    document = copy.deepcopy(experiment.promotion)
    document["decisions"][1]["decision"] = "keep_incumbent"
    experiment.write_promotion(document)
    refused(experiment, "no promoted generation in")
    with pytest.raises(ApplyError, match="candidate_workflow_direct is not promotable: keep_incumbent"):
        validate_promotion_for_apply(document, **bound(experiment))


def test_refuses_without_any_promotion(experiment):
    (experiment.gen / "promotion.json").unlink()
    refused(experiment, "no promoted generation in")


# ─── validate_promotion_for_apply directly ──────────────────────────────────


def bound(experiment: Experiment, **overrides) -> dict:
    values = {
        "overlay_digest": experiment.digest,
        "benchmark_model": MODEL,
        "effort": "high",
        "proposer_model": None,
        "candidate_origin": "manual-initial-overlay",
        "selected_tasks": [task_binding()],
        "target_base_digests": experiment.base_digests,
        "required_candidate_arms": [candidate for _, candidate in PAIRS],
        "pairs": PAIRS,
        "policy": gate.resolve_policy(experiment.config["gate"]),
        "now": NOW,
    }
    values.update(overrides)
    return values


def test_validate_accepts_the_fixture(experiment):
    validate_promotion_for_apply(experiment.promotion, **bound(experiment))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("effort", None),
        ("proposer_model", "claude-sonnet-4-20250514"),
        ("candidate_origin", "model-proposer"),
        ("overlay_digest", "f" * 64),
        ("required_candidate_arms", ["candidate_workflow"]),
        ("target_base_digests", {TARGETS[0]: "0" * 64}),
    ],
)
def test_validate_refuses_every_binding_mismatch(experiment, field, value):
    overrides = {field: value}
    if field == "required_candidate_arms":
        overrides["pairs"] = PAIRS[:1]
    name = "candidate_overlay_digest" if field == "overlay_digest" else field
    with pytest.raises(ApplyError, match=f"promotion binding mismatch for {name}"):
        validate_promotion_for_apply(experiment.promotion, **bound(experiment, **overrides))


def test_validate_refuses_changed_selected_tasks(experiment):
    tasks = [task_binding()]
    tasks[0]["oracle_digest"] = "e" * 64
    with pytest.raises(ApplyError, match="promotion binding mismatch for selected_tasks"):
        validate_promotion_for_apply(experiment.promotion, **bound(experiment, selected_tasks=tasks))
    with pytest.raises(ApplyError, match="no selected tasks"):
        validate_promotion_for_apply(experiment.promotion, **bound(experiment, selected_tasks=[]))
    broken = [task_binding()]
    broken[0]["oracle_files"] = []
    with pytest.raises(ApplyError, match="hidden-oracle files"):
        validate_promotion_for_apply(experiment.promotion, **bound(experiment, selected_tasks=broken))


def test_validate_refuses_bad_decisions_and_documents(experiment):
    reordered = copy.deepcopy(experiment.promotion)
    reordered["decisions"].reverse()
    with pytest.raises(ApplyError, match="do not cover exactly"):
        validate_promotion_for_apply(reordered, **bound(experiment))
    duplicated = copy.deepcopy(experiment.promotion)
    duplicated["decisions"][1] = copy.deepcopy(duplicated["decisions"][0])
    with pytest.raises(ApplyError, match="duplicate promotion decision"):
        validate_promotion_for_apply(duplicated, **bound(experiment))
    wrong_incumbent = copy.deepcopy(experiment.promotion)
    wrong_incumbent["decisions"][0]["incumbent_arm"] = "baseline"
    with pytest.raises(ApplyError, match="pairs it with baseline"):
        validate_promotion_for_apply(wrong_incumbent, **bound(experiment))
    aborted = copy.deepcopy(experiment.promotion)
    aborted["run_status"] = "aborted"
    with pytest.raises(ApplyError, match="run_status"):
        validate_promotion_for_apply(aborted, **bound(experiment))
    with pytest.raises(ApplyError, match="not a valid promotion"):
        validate_promotion_for_apply({**experiment.promotion, "extra": 1}, **bound(experiment))
    stretched = copy.deepcopy(experiment.promotion)
    stretched["evidence_expires_at"] = "2026-07-01T12:00:00Z"
    with pytest.raises(ApplyError, match="at most 90 days"):
        validate_promotion_for_apply(stretched, **bound(experiment))
    policy = dataclasses.replace(gate.resolve_policy(experiment.config["gate"]), metric="output_tokens")
    with pytest.raises(ApplyError, match="mismatch for policy"):
        validate_promotion_for_apply(experiment.promotion, **bound(experiment, policy=policy))


# ─── Failures inside the transaction ────────────────────────────────────────


def test_a_failure_between_two_swaps_rolls_everything_back(experiment):
    calls: list[tuple[Path, Path]] = []

    def flaky(source, target):
        calls.append((Path(source), Path(target)))
        if len(calls) == 2:
            raise OSError("disk vanished mid-transaction")
        os.replace(source, target)

    refused(experiment, "overlay apply failed and all replacements were rolled back: disk vanished", swap=flaky)
    # swap 1 published the first target, swap 2 failed, swap 3 restored the first target from its backup.
    assert [target for _, target in calls] == [
        experiment.repository / TARGETS[0],
        experiment.repository / TARGETS[1],
        experiment.repository / TARGETS[0],
    ]
    assert not list(experiment.repository.glob(".skillbench-apply-recovery-*"))


def test_a_failed_rollback_writes_a_recovery_file(experiment):
    calls = []

    def broken(source, target):
        calls.append(target)
        if len(calls) >= 2:
            raise OSError("read-only file system")
        os.replace(source, target)

    with pytest.raises(ApplyError, match="rollback was incomplete; recovery: ") as info:
        experiment.apply(swap=broken)
    recoveries = list(experiment.repository.glob(".skillbench-apply-recovery-*.json"))
    assert len(recoveries) == 1 and str(recoveries[0]) in str(info.value)
    record = json.loads(recoveries[0].read_text(encoding="utf-8"))
    assert record["transaction_state"] == "rollback-incomplete"
    assert "read-only file system" in record["failure"]
    states = {entry["path"]: entry for entry in record["targets"]}
    assert states[TARGETS[0]]["state"] == "candidate"
    assert all(states[target]["state"] == "original" for target in TARGETS[1:])
    backup = Path(states[TARGETS[0]]["backup"])
    assert backup.read_bytes() == INCUMBENT["SKILL.md"]
    assert all(states[target]["backup"] is None for target in TARGETS[1:])
    # Only the backup the recovery file names is left behind, and the journal (in the git directory) for the next run.
    assert experiment.leftovers() == [str(backup.relative_to(experiment.repository))]
    assert experiment.journal.is_file()
    # Once the file system works again, the next apply's recovery finishes the rollback.
    message = apply.recover_interrupted(experiment.repository, experiment.config["skills"])
    assert "ROLLED IT BACK: 1 target(s) restored" in message and TARGETS[0] in message
    assert all(content == INCUMBENT[Path(target).name] for target, (content, _) in experiment.snapshot().items())
    assert experiment.leftovers() == []


def test_write_transaction_refuses_a_drifted_base_before_writing(experiment):
    target = experiment.repository / TARGETS[2]
    target.write_bytes(b"drifted\n")
    before = experiment.snapshot()
    plan = [(path, CANDIDATE[Path(path).name], experiment.base_digests[path]) for path in TARGETS]
    with pytest.raises(ApplyError, match=f"drifted .*{TARGETS[2]}.*nothing was written"):
        apply.write_transaction(experiment.repository, plan)
    assert experiment.snapshot() == before
    assert experiment.leftovers() == []


# ─── A crash in the middle ──────────────────────────────────────────────────

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")


def cli_apply(
    experiment: Experiment, env: dict[str, str] | None = None, options: tuple[str, ...] = ("--yes",)
) -> subprocess.CompletedProcess:
    """The real `skillbench apply`, run from a folder whose config/config.yaml is the experiment's config; stdin is
    not a terminal."""
    workdir = experiment.tmp / "cwd"
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    accepted = tuple(experiment.config["evolution"]["accept_flags"])
    (workdir / "config" / "config.yaml").write_text(config_text(5.0, accepted), encoding="utf-8")
    return subprocess.run(
        [SKILLBENCH, "apply", str(experiment.results), "--repository", str(experiment.repository), *options],
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def fresh_promotion(experiment: Experiment) -> None:
    """The fixture's evidence is dated for in-process calls with a fixed clock; the CLI uses the real one."""
    recent = datetime.now(UTC) - timedelta(hours=1)
    experiment.write_promotion(
        promotion(
            experiment.config, experiment.digest, experiment.base_digests, generated_at=recent, flags=experiment.flags
        )
    )


@pytest.mark.parametrize("swaps", [0, 1, 2, 3, 4])
def test_an_apply_killed_after_any_swap_is_rolled_back_and_redone_by_the_next_run(experiment, swaps):
    fresh_promotion(experiment)
    modes = {target: mode for target, (_, mode) in experiment.snapshot().items()}

    crashed = cli_apply(experiment, {apply.CRASH_HOOK_ENV: str(swaps)})

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    contents = [content for content, _ in experiment.snapshot().values()]
    expected = [CANDIDATE[Path(t).name] for t in TARGETS[:swaps]] + [INCUMBENT[Path(t).name] for t in TARGETS[swaps:]]
    assert contents == expected  # the inconsistent state a crash leaves
    assert experiment.journal.is_file() and stat.S_IMODE(experiment.journal.stat().st_mode) == 0o600

    rerun = cli_apply(experiment)

    assert rerun.returncode == 0, rerun.stderr
    assert "found an interrupted apply (started " in rerun.stdout
    assert (
        f"ROLLED IT BACK: {swaps} target(s) restored to their original bytes, {len(TARGETS) - swaps} already "
        "held them" in rerun.stdout
    )
    assert all(f"  restored {target}" in rerun.stdout for target in TARGETS[:swaps])
    assert "applied the promoted overlay to 4 file(s)" in rerun.stdout
    after = experiment.snapshot()
    assert [content for content, _ in after.values()] == [CANDIDATE[Path(t).name] for t in TARGETS]
    assert {target: mode for target, (_, mode) in after.items()} == modes
    assert experiment.leftovers() == []
    assert git(experiment.repository, "rev-parse", "HEAD").strip() == experiment.head


def test_recovery_alone_returns_every_target_to_its_original_bytes(experiment):
    fresh_promotion(experiment)
    assert cli_apply(experiment, {apply.CRASH_HOOK_ENV: "2"}).returncode == -signal.SIGKILL

    message = apply.recover_interrupted(experiment.repository, experiment.config["skills"])

    assert "ROLLED IT BACK: 2 target(s) restored" in message
    assert "6 temporary file(s) removed" in message  # 4 backups, 2 candidates not yet swapped in
    assert [content for content, _ in experiment.snapshot().values()] == [INCUMBENT[Path(t).name] for t in TARGETS]
    assert experiment.leftovers() == []
    assert not experiment.journal.exists()
    assert apply.recover_interrupted(experiment.repository, experiment.config["skills"]) is None


def test_recovery_changes_nothing_when_a_target_was_edited_after_the_crash(experiment):
    fresh_promotion(experiment)
    assert cli_apply(experiment, {apply.CRASH_HOOK_ENV: "1"}).returncode == -signal.SIGKILL
    (experiment.repository / TARGETS[3]).write_bytes(b"edited by hand after the crash\n")
    before = experiment.snapshot()
    leftovers = experiment.leftovers()

    rerun = cli_apply(experiment)

    assert rerun.returncode == 1
    assert f"NOT APPLIED: an interrupted apply left {experiment.journal}" in rerun.stderr
    assert f"but {TARGETS[3]} hold(s) neither the original nor the candidate bytes" in rerun.stderr
    assert experiment.snapshot() == before and experiment.leftovers() == leftovers


# ─── A forged journal ───────────────────────────────────────────────────────

ATTACKER_BYTES = b"#!/bin/sh\necho pwned\n"


def forged_journal(experiment: Experiment, target: str, *, original: bytes = ATTACKER_BYTES, mode: int = 0o644) -> dict:
    """A journal as an attacker writes it: `target` "holds its candidate" (the digest of what is there now), so a
    recovery that trusted it would replace the file with `original` and chmod it to `mode`."""
    current = experiment.repository / target
    present = current.read_bytes() if current.is_file() and not current.is_symlink() else b""
    name = Path(target).name
    return {
        "schema": apply.JOURNAL_SCHEMA,
        "created_at": "2026-03-01T12:00:00Z",
        "targets": [
            {
                "path": target,
                "mode": mode,
                "original_sha256": hashlib.sha256(original).hexdigest(),
                "original_base64": base64.b64encode(original).decode("ascii"),
                "candidate_sha256": hashlib.sha256(present).hexdigest(),
                "temporary_files": [f"{apply.TEMP_PREFIX}{name}.{kind}" for kind in apply.TEMP_KINDS],
            }
        ],
    }


def plant(path: Path, document: dict, mode: int = 0o600) -> None:
    path.write_text(json.dumps(document), encoding="utf-8")
    path.chmod(mode)


def tree_state(*roots: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under `roots` (outside .git): kind, content or link target, mode."""
    state = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if ".git" in path.relative_to(root).parts:
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                state[str(path)] = ("link", os.readlink(path).encode(), 0)
            elif stat.S_ISREG(info.st_mode):
                state[str(path)] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
            else:
                state[str(path)] = ("dir", b"", stat.S_IMODE(info.st_mode))
    return state


def recovery_refused(experiment: Experiment, match: str, *also: Path) -> str:
    """The recovery stops before it changes any file of the repository (or of `also`); its message."""
    before = tree_state(experiment.repository, *also)
    with pytest.raises(ApplyError) as caught:
        apply.recover_interrupted(experiment.repository, experiment.config["skills"])
    assert re.search(match, str(caught.value)), str(caught.value)
    assert tree_state(experiment.repository, *also) == before
    return str(caught.value)


def test_a_journal_committed_to_the_repository_is_refused_and_nothing_is_applied(experiment):
    fresh_promotion(experiment)
    readme = experiment.repository / "README.md"
    readme.write_text("project readme\n")
    plant(experiment.repository / apply.WORK_TREE_JOURNAL_NAME, forged_journal(experiment, "README.md"), 0o644)
    git(experiment.repository, "add", "--all")
    git(experiment.repository, "commit", "--quiet", "-m", "a pull request that carries a journal")
    before = tree_state(experiment.repository)

    rerun = cli_apply(experiment)

    assert rerun.returncode == 1
    journal = experiment.repository / apply.WORK_TREE_JOURNAL_NAME
    assert f"NOT APPLIED: {journal} is committed to the repository" in rerun.stderr
    assert "is not used; nothing was changed. Delete it (`git rm` it" in rerun.stderr
    assert tree_state(experiment.repository) == before  # neither the forged restore nor the promotion ran
    assert readme.read_text() == "project readme\n" and not experiment.journal.exists()


def test_a_journal_in_the_work_tree_is_refused_even_when_untracked(experiment):
    plant(experiment.repository / apply.WORK_TREE_JOURNAL_NAME, forged_journal(experiment, TARGETS[0]))

    message = recovery_refused(experiment, "is in the work tree")

    assert "committed" not in message
    with pytest.raises(ApplyError, match="is in the work tree"):
        experiment.apply()


@pytest.mark.parametrize(
    ("target", "match"),
    [
        ("../outside.md", r"cannot be trusted \(.*targets\[0\]\.path"),
        (".claude/skills/change-work/../../../outside.md", r"cannot be trusted"),
        (".git/config", r"targets\[0\]\.path '\.git/config' is not a plain relative path"),
        (".claude/skills/change-work/.git/x.md", r"is not a plain relative path"),
        ("README.md", r"'README\.md' is not a Markdown file of an evolvable skill"),
        (".claude/skills/change-work/run.sh", r"is not a Markdown file of an evolvable skill"),
        (".claude/skills/other-skill/SKILL.md", r"is not a Markdown file of an evolvable skill"),
    ],
)
def test_a_journal_naming_a_file_that_is_no_skill_file_changes_nothing(experiment, target, match):
    outside = experiment.tmp / "outside.md"
    outside.write_text("a file beside the repository\n")
    for path in (experiment.repository / "README.md", experiment.repository / ".claude/skills/other-skill/SKILL.md"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not an evolvable skill file\n")
    config_before = (experiment.repository / ".git" / "config").read_bytes()
    plant(experiment.journal, forged_journal(experiment, target))

    message = recovery_refused(experiment, match, experiment.tmp / "outside.md")

    assert str(experiment.journal) in message and "nothing was changed" in message.lower()
    assert (experiment.repository / ".git" / "config").read_bytes() == config_before
    assert outside.read_text() == "a file beside the repository\n"


@pytest.mark.parametrize(
    ("mode", "match"),
    [
        (0o4755, r"cannot be trusted \(.*2541 is greater than the maximum of 493"),
        (0o2755, r"cannot be trusted"),
        (0o1644, r"cannot be trusted"),
        (0o664, r"targets\[0\]\.mode 0664 has bits a skill file never needs"),
        (0o722, r"targets\[0\]\.mode 0722 has bits a skill file never needs"),
    ],
)
def test_a_journal_asking_for_a_setuid_or_writable_mode_changes_nothing(experiment, mode, match):
    (experiment.repository / TARGETS[0]).write_bytes(CANDIDATE["SKILL.md"])
    plant(experiment.journal, forged_journal(experiment, TARGETS[0], original=INCUMBENT["SKILL.md"], mode=mode))

    recovery_refused(experiment, match)


def test_a_journal_whose_target_passes_through_a_symlink_changes_nothing(experiment, tmp_path):
    host = tmp_path / "host-folder"
    host.mkdir()
    (host / "SKILL.md").write_text("a host file\n")
    mirror = experiment.repository / "plugin" / "skills" / "change-work"
    artifacts.remove_tree(mirror)
    mirror.symlink_to(host, target_is_directory=True)
    plant(experiment.journal, forged_journal(experiment, "plugin/skills/change-work/SKILL.md"))

    recovery_refused(experiment, r"passes through .*plugin/skills/change-work, which is not a real folder", host)

    assert (host / "SKILL.md").read_text() == "a host file\n"


def test_a_journal_whose_target_is_a_symlink_changes_nothing(experiment, tmp_path):
    host = tmp_path / "host-file.md"
    host.write_text("a host file\n")
    target = experiment.repository / TARGETS[0]
    target.unlink()
    target.symlink_to(host)
    plant(experiment.journal, forged_journal(experiment, TARGETS[0]))

    recovery_refused(experiment, r"promotion target .*SKILL\.md is not a regular file", tmp_path / "host-file.md")

    assert host.read_text() == "a host file\n"


def test_a_journal_restoring_bytes_that_head_never_committed_changes_nothing(experiment):
    (experiment.repository / TARGETS[0]).write_bytes(CANDIDATE["SKILL.md"])
    plant(experiment.journal, forged_journal(experiment, TARGETS[0], original=ATTACKER_BYTES))

    recovery_refused(experiment, r"are not what HEAD commits at that path; a recovery only restores committed bytes")


def test_a_journal_naming_other_temporary_files_changes_nothing(experiment):
    (experiment.repository / TARGETS[0]).write_bytes(CANDIDATE["SKILL.md"])
    document = forged_journal(experiment, TARGETS[0], original=INCUMBENT["SKILL.md"])
    document["targets"][0]["temporary_files"] = [f"{apply.TEMP_PREFIX}{name}" for name in ("x", "y", "z")]
    plant(experiment.journal, document)

    recovery_refused(experiment, r"temporary_files .* are not the target's own temporary files")


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_a_journal_others_could_write_is_not_trusted(experiment, mode):
    (experiment.repository / TARGETS[0]).write_bytes(CANDIDATE["SKILL.md"])
    plant(experiment.journal, forged_journal(experiment, TARGETS[0], original=INCUMBENT["SKILL.md"]), mode)

    recovery_refused(experiment, rf"cannot be trusted \(it is owned by uid {os.geteuid()} with mode 0{mode:o}")


def test_a_well_formed_journal_of_a_real_crash_is_still_recovered(experiment):
    """The rules keep the recovery of a genuine journal working: the same forged shape, but with the committed
    bytes as the original, restores them."""
    (experiment.repository / TARGETS[0]).write_bytes(CANDIDATE["SKILL.md"])
    plant(experiment.journal, forged_journal(experiment, TARGETS[0], original=INCUMBENT["SKILL.md"], mode=0o644))

    message = apply.recover_interrupted(experiment.repository, experiment.config["skills"])

    assert "ROLLED IT BACK: 1 target(s) restored" in message
    assert (experiment.repository / TARGETS[0]).read_bytes() == INCUMBENT["SKILL.md"]
    assert not experiment.journal.exists()


# ─── What apply shows before it writes, and the content flags ───────────────


def test_apply_without_yes_prints_the_whole_diff_and_writes_nothing(experiment):
    fresh_promotion(experiment)
    before = experiment.snapshot()

    asked = cli_apply(experiment, options=())

    assert asked.returncode == 1
    assert "NOT APPLIED: nothing was written" in asked.stderr and "--yes" in asked.stderr
    out = asked.stdout
    assert f"would write 4 file(s): {', '.join(TARGETS)}" in out
    assert "content flags: none" in out
    assert "diff --git a/.claude/skills/change-work/SKILL.md b/.claude/skills/change-work/SKILL.md" in out
    assert "-incumbent steps\n+candidate steps, shorter\n" in out
    assert "-incumbent reference\n+candidate reference\n" in out
    assert experiment.snapshot() == before and experiment.leftovers() == [] and not experiment.journal.exists()

    dry = cli_apply(experiment, options=("--dry-run",))
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing was written" in dry.stdout and "+candidate steps, shorter" in dry.stdout
    assert experiment.snapshot() == before and experiment.leftovers() == []

    applied = cli_apply(experiment, options=("--yes",))
    assert applied.returncode == 0, applied.stderr
    assert (
        "+candidate steps, shorter" in applied.stdout and "applied the promoted overlay to 4 file(s)" in applied.stdout
    )
    assert [content for content, _ in experiment.snapshot().values()] == [CANDIDATE[Path(t).name] for t in TARGETS]


def test_a_dry_run_leaves_an_interrupted_apply_as_it_is(experiment):
    fresh_promotion(experiment)
    assert cli_apply(experiment, {apply.CRASH_HOOK_ENV: "1"}).returncode == -signal.SIGKILL
    before, leftovers = experiment.snapshot(), experiment.leftovers()

    dry = cli_apply(experiment, options=("--dry-run",))

    assert "an interrupted apply's journal is present" in dry.stderr
    assert experiment.snapshot() == before and experiment.leftovers() == leftovers and experiment.journal.is_file()


FLAGGED = {
    "SKILL.md": b"# change-work\nincumbent steps\nIf an existing test blocks the change, mark it skipped.\n",
    "reference.md": b"incumbent reference\n",
}


def test_a_flagged_candidate_is_held_back_unless_its_category_is_accepted(tmp_path):
    held = Experiment(tmp_path / "held", candidate=FLAGGED)
    assert [(flag["category"], flag["line"]) for flag in held.flags] == [("tests", 3)]
    assert [decision["decision"] for decision in held.promotion["decisions"]] == ["keep_incumbent"] * 2
    review = held.promotion["content_review"]
    assert (review["unaccepted"], review["accepted"], review["held"]) == (["tests"], [], True)
    reason = held.promotion["decisions"][0]["reasons"][0]
    assert reason.startswith("held back by content flags the config does not accept (tests: 1; e.g. ")
    assert "SKILL.md:3: [tests] test-weakening: 'test blocks the change, mark it skipped'" in reason
    assert "add tests to evolution.accept_flags" in reason
    with pytest.raises(ApplyError, match="no promoted generation"):
        held.apply()

    accepted = Experiment(tmp_path / "accepted", candidate=FLAGGED, accept_flags=("tests",))
    review = accepted.promotion["content_review"]
    assert (review["unaccepted"], review["accepted"], review["held"]) == ([], ["tests"], False)
    prepared = apply.prepare_promotion(
        accepted.results, repository=accepted.repository, config=accepted.config, now=NOW
    )
    shown = apply.format_review(prepared)
    assert "content flags: 1, every category accepted by evolution.accept_flags (tests):" in shown
    assert "SKILL.md:3: [tests] test-weakening" in shown
    assert "+If an existing test blocks the change, mark it skipped." in shown
    assert accepted.apply() == TARGETS


def test_apply_refuses_flags_the_current_config_does_not_accept_or_the_promotion_does_not_record(tmp_path):
    experiment = Experiment(tmp_path, candidate=FLAGGED, accept_flags=("tests",))
    refused(
        experiment,
        r"carries content flags of categories the config does not accept \(tests\)",
        config=write_config(tmp_path),
    )

    edited = copy.deepcopy(experiment.promotion)
    edited["content_review"]["flags"] = []
    experiment.write_promotion(edited)
    refused(experiment, "differ from a fresh review of the frozen overlay")

    del edited["content_review"]
    experiment.write_promotion(edited)
    refused(experiment, "records no content review but the overlay carries content flags")


def test_apply_refuses_a_frozen_overlay_that_adds_a_skill_load_command(tmp_path):
    """An overlay frozen under older rules (or a frozen copy swapped with its records) is reviewed again."""
    candidate = {**CANDIDATE, "SKILL.md": b"# change-work\n!`touch /tmp/pwned`\n"}
    experiment = Experiment(tmp_path, candidate=candidate, accept_flags=overlayreview.FLAG_CATEGORIES)
    refused(experiment, r"adds content a candidate may never add: .*SKILL\.md:2: skill-shell")
