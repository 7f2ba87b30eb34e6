"""Evidence bundle: selection, compact rows, learnings, and staging real run folders with every refusal."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rowfactory import make_binding, make_review, make_review_row, make_row, make_trigger_row
from skillbench.base.artifacts import canonical_json, compact_json, validate, write_artifact, write_jsonl
from skillbench.decision.gate import promotion_document
from skillbench.evolution import evidence
from skillbench.evolution.evidence import (
    EXCLUDED,
    MAX_BUNDLE_BYTES,
    MAX_FILE_BYTES,
    EvidenceError,
    compact_row,
    read_learnings,
    run_folder,
    select_evidence,
    stage_evidence,
)

CANARY = "canary-Zq81x-SECRET-payload"
INC, CAND = "workflow", "candidate_workflow"


def stream(*texts: str) -> bytes:
    """A small parent-captured event stream in the canonical compact form transcripts are written in."""
    events = [{"type": "system", "subtype": "init", "session_id": "s1"}]
    events += [{"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}} for text in texts]
    events.append({"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.01})
    return "".join(compact_json(event) + "\n" for event in events).encode("utf-8")


def big_stream(size: int, marker: str = "x") -> bytes:
    """An event stream of at least ``size`` bytes made of whole canonical lines."""
    line = compact_json({"type": "assistant", "text": marker * 200}) + "\n"
    return (line * (size // len(line) + 1)).encode("utf-8")


def write_cell(
    root: Path,
    row: dict,
    *,
    generation: int | None = None,
    patch: bytes | None = None,
    transcripts: tuple[bytes, ...] = (),
) -> dict:
    """Write a row's run folder (patch.diff, 0600 transcripts in a 0700 folder); return the row naming them."""
    folder = run_folder(root, row, generation)
    folder.mkdir(parents=True, exist_ok=True)
    if patch is not None:
        (folder / "patch.diff").write_bytes(patch)
    artifacts = []
    if transcripts:
        directory = folder / "transcripts"
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)
        for number, payload in enumerate(transcripts):
            name = f"{row['arm']}-session{number}.jsonl"
            path = directory / name
            path.write_bytes(payload)
            path.chmod(0o600)
            artifacts.append(
                {
                    "path": f"transcripts/{name}",
                    "sha256": hashlib.sha256(payload).hexdigest(),
                    "bytes": len(payload),
                    "source": "parent-captured-stream-json",
                }
            )
    return validate({**row, "transcript_artifacts": artifacts}, "result-row")


def write_rows(root: Path, rows: list[dict], folder: str = "gen1") -> Path:
    path = root / folder / "results.jsonl"
    write_jsonl(path, rows, "result-row")
    return path


def promotion_file(root: Path, rows: list[dict], folder: str = "gen1") -> Path:
    document = promotion_document(
        rows,
        pairs=[(INC, CAND)],
        policy=None,
        binding=make_binding([CAND]),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    path = root / folder / "promotion.json"
    write_artifact(path, document, "promotion")
    return path


def stage(tmp_path: Path, *, root: Path | None, rows_path: Path | None, **overrides) -> tuple[dict, Path]:
    destination = overrides.pop("destination", tmp_path / "next" / "evidence")
    arguments = {
        "destination": destination,
        "results_root": root,
        "rows_path": rows_path,
        "generation": 1 if rows_path is not None else None,
        "promotion_path": None,
        "prior_proposal": None,
        "learnings": [],
        "secrets": [CANARY],
    }
    arguments.update(overrides)
    return stage_evidence(**arguments), destination


def bundle_files(destination: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(destination.iterdir())}


def leftovers(parent: Path) -> list[str]:
    return sorted(path.name for path in parent.iterdir()) if parent.exists() else []


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "results" / "exp"
    path.mkdir(parents=True)
    return path


# ─── Selection, compact rows, learnings ─────────────────────────────────────


def test_constants_follow_the_contract():
    assert evidence.MAX_EVIDENCE_ROWS == 12
    assert evidence.MAX_TRANSCRIPTS_PER_ROW == 2
    assert evidence.MAX_LEARNINGS == 40
    assert evidence.VERIFY_TAIL_CHARS == 600
    assert MAX_FILE_BYTES == 256 * 1024
    assert MAX_BUNDLE_BYTES == 2 * 1024 * 1024


def test_select_evidence_drops_excluded_kinds_then_orders_unresolved_before_costly_resolved():
    rows = [
        make_row("b", INC, 1, resolved=False, error_kind="verify-failed"),
        make_row("a", INC, 0, cost_usd=0.5),
        *[make_row("x", INC, n, resolved=False, error_kind=kind) for n, kind in enumerate(sorted(EXCLUDED))],
        make_row("b", INC, 0, resolved=False, error_kind="skill-not-invoked"),
        make_row("a", CAND, 0, cost_usd=None),
        make_row("a", CAND, 1, cost_usd=3.0),
        make_row("a", "baseline", 2, resolved=False),
        make_row("c", INC, 0, cost_usd=2.0),
    ]
    selected = select_evidence(rows)
    assert [(row["task"], row["arm"], row["run"]) for row in selected] == [
        ("a", "baseline", 2),
        ("b", INC, 0),
        ("b", INC, 1),
        ("a", CAND, 1),
        ("c", INC, 0),
        ("a", INC, 0),
        ("a", CAND, 0),
    ]
    assert not any(row["error_kind"] in EXCLUDED for row in selected)
    assert [row["run"] for row in select_evidence(rows, max_rows=2)] == [2, 0]
    assert select_evidence(rows, max_rows=0) == []
    with pytest.raises(ValueError):
        select_evidence(rows, max_rows=-1)


def test_select_evidence_takes_at_most_twelve_rows():
    rows = [make_row("t", INC, run, cost_usd=float(run)) for run in range(20)]
    selected = select_evidence(rows)
    assert [row["run"] for row in selected] == list(range(19, 7, -1))


def test_compact_row_keeps_what_a_proposer_uses_and_names_staged_files():
    row = make_row(
        "t",
        CAND,
        2,
        resolved=False,
        error_kind="verify-failed",
        verify_output="v" * 700 + "TAIL",
        diff_files=3,
        diff_insertions=40,
        diff_deletions=7,
        session_ids=["plan-1", "work-2"],
        skill_invoked=None,
    )
    compact = compact_row(row, 4, patch_staged=True, transcripts_staged=2)
    assert compact == {
        "task": "t",
        "class": "demo",
        "arm": CAND,
        "run": 2,
        "resolved": False,
        "error_kind": "verify-failed",
        "cost_usd": 1.0,
        "num_turns": 5,
        "output_tokens": 100,
        "churn": "3f/+40/\u22127",
        "session_ids": ["plan-1", "work-2"],
        "skill_invoked": None,
        "patch_file": "patch-4.diff",
        "transcript_files": ["transcript-4-0.jsonl", "transcript-4-1.jsonl"],
        "verify_tail": ("v" * 700 + "TAIL")[-600:],
    }
    bare = compact_row(row, 0)
    assert bare["patch_file"] is None and bare["transcript_files"] == []


def test_read_learnings_skips_bad_lines_keeps_evolvable_skills_and_the_latest_cap(tmp_path):
    path = tmp_path / "learnings.jsonl"
    lines = ["", "not json", "[1, 2]", '"a string"', json.dumps({"skill": "other", "note": 0})]
    lines += [json.dumps({"skill": "plan" if n % 2 else "work", "note": n}) for n in range(50)]
    lines += [json.dumps({"skill": ["plan"], "note": "unhashable"}), "   ", "{broken"]
    path.write_text("\n".join(lines) + "\n")

    kept = read_learnings(path, ["plan", "work"])
    assert len(kept) == 40
    assert [entry["note"] for entry in kept] == list(range(10, 50))
    assert [entry["note"] for entry in read_learnings(path, ["plan"], cap=3)] == [45, 47, 49]
    assert read_learnings(path, ["plan"], cap=0) == []
    assert read_learnings(path, []) == []
    assert read_learnings(None, ["plan"]) == []
    assert read_learnings(tmp_path / "missing.jsonl", ["plan"]) == []


def test_run_folder_maps_each_row_into_the_folder_of_its_batch(tmp_path):
    # A generation's anchor and candidates live in its folder, the cache's arms in cells/.
    assert (
        run_folder(tmp_path, make_row("t", INC, 2, batch="gen3"), 3) == tmp_path / "gen3" / "cells" / "t" / INC / "run2"
    )
    cached = make_row("t", "baseline", 0, batch="cache")
    assert run_folder(tmp_path, cached, None) == tmp_path / "cells" / "t" / "baseline" / "run0"
    assert run_folder(tmp_path, make_row("t", CAND, 1, batch="gen3/look1"), None) == (
        tmp_path / "gen3" / "cells" / "t" / CAND / "run1"
    )
    # Rows of before batches were recorded: candidates in the generation given, other arms in the cache.
    assert run_folder(tmp_path, make_row("t", INC, 2, batch=None), 3) == tmp_path / "cells" / "t" / INC / "run2"
    assert (
        run_folder(tmp_path, make_row("t", CAND, 1, batch=None), 3) == tmp_path / "gen3" / "cells" / "t" / CAND / "run1"
    )
    with pytest.raises(EvidenceError, match="no generation"):
        run_folder(tmp_path, make_row("t", CAND, 1, batch=None), None)
    for bad in ({"task": "..", "arm": INC, "run": 0}, {"task": "a/b", "arm": INC, "run": 0}):
        with pytest.raises(EvidenceError, match="single safe path component"):
            run_folder(tmp_path, bad, None)
    with pytest.raises(EvidenceError, match="run"):
        run_folder(tmp_path, {"task": "t", "arm": INC, "run": True}, None)


# ─── Staging ────────────────────────────────────────────────────────────────


def test_stage_evidence_builds_a_verified_private_bundle(tmp_path, root):
    unresolved = write_cell(
        root,
        make_row("t1", CAND, 0, resolved=False, error_kind="verify-failed", verify_output="FAILED test_x"),
        generation=1,
        patch=b"diff --git a/x b/x\n+change\n",
        transcripts=(stream("plan text"), stream("work text")),
    )
    resolved = write_cell(root, make_row("t1", INC, 0, cost_usd=2.5), transcripts=(stream("incumbent"),))
    cheap = write_cell(root, make_row("t2", INC, 0, cost_usd=0.1), patch=b"")
    # Excluded rows are never read, so their broken artifacts do not matter.
    excluded = make_row("t3", INC, 0, resolved=False, error_kind="infra-error")
    rows = [resolved, unresolved, cheap, excluded]
    rows_path = write_rows(root, rows)
    promotion = promotion_file(root, rows)
    proposal = root / "gen1" / "proposal.md"
    proposal.write_text("# Proposal\nTighten the plan step.\n")
    learnings = [{"skill": "plan", "task": "t1", "friction": "slow", "suggestion": "shorter"}]

    manifest, destination = stage(
        tmp_path, root=root, rows_path=rows_path, promotion_path=promotion, prior_proposal=proposal, learnings=learnings
    )

    files = bundle_files(destination)
    assert sorted(files) == [
        "gate-summary.json",
        "learnings.json",
        "manifest.json",
        "patch-0.diff",
        "patch-2.diff",
        "prior-proposal.md",
        "selected-rows.json",
        "transcript-0-0.jsonl",
        "transcript-0-1.jsonl",
        "transcript-1-0.jsonl",
    ]
    assert stat.S_IMODE(destination.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((destination / name).stat().st_mode) == 0o600 for name in files)
    assert leftovers(destination.parent) == ["evidence"]

    assert validate(json.loads(files["manifest.json"]), "evidence-manifest") == manifest
    assert files["manifest.json"].decode() == canonical_json(manifest)
    listed = {entry["name"]: entry for entry in manifest["files"]}
    assert sorted(listed) == sorted(set(files) - {"manifest.json"})
    for name, entry in listed.items():
        assert entry["bytes"] == len(files[name])
        assert entry["sha256"] == hashlib.sha256(files[name]).hexdigest()
        assert entry["truncated"] is False
    assert manifest["total_bytes"] == sum(len(files[name]) for name in listed)
    assert manifest["generation"] == 1
    assert manifest["sources"] == {
        "results_root": str(root),
        "rows": str(rows_path),
        "promotion": str(promotion),
        "prior_proposal": str(proposal),
    }
    assert manifest["counts"] == {
        "rows_read": 4,
        "rows_excluded": 1,
        "rows_selected": 3,
        "rows_staged": 3,
        "patches": 2,
        "transcripts": 3,
        "learnings": 1,
        "gate_decisions": 1,
    }
    assert manifest["trimmed_rows"] == 0
    assert manifest["prior_proposal_staged"] is True and manifest["prior_proposal_dropped"] is False

    compact = json.loads(files["selected-rows.json"])
    assert [(row["task"], row["arm"]) for row in compact] == [("t1", CAND), ("t1", INC), ("t2", INC)]
    assert [row["patch_file"] for row in compact] == ["patch-0.diff", None, "patch-2.diff"]
    assert [row["transcript_files"] for row in compact] == [
        ["transcript-0-0.jsonl", "transcript-0-1.jsonl"],
        ["transcript-1-0.jsonl"],
        [],
    ]
    assert compact[0]["verify_tail"] == "FAILED test_x"
    assert files["transcript-0-1.jsonl"] == stream("work text")
    assert files["transcript-1-0.jsonl"] == stream("incumbent")
    assert files["patch-0.diff"] == b"diff --git a/x b/x\n+change\n"
    assert files["prior-proposal.md"] == b"# Proposal\nTighten the plan step.\n"
    assert json.loads(files["learnings.json"]) == learnings
    [gate_line] = json.loads(files["gate-summary.json"])
    assert gate_line.startswith(f"{CAND}: insufficient_evidence — ")


def test_staging_is_deterministic(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), patch=b"+a\n", transcripts=(stream("hello"),))
    rows_path = write_rows(root, [row])
    first, first_dir = stage(tmp_path, root=root, rows_path=rows_path, destination=tmp_path / "a" / "evidence")
    second, second_dir = stage(tmp_path, root=root, rows_path=rows_path, destination=tmp_path / "b" / "evidence")
    assert first == second
    assert bundle_files(first_dir) == bundle_files(second_dir)


def test_generation_zero_without_seed_results_is_a_valid_empty_bundle(tmp_path):
    manifest, destination = stage(tmp_path, root=None, rows_path=None, generation=None)
    files = bundle_files(destination)
    assert sorted(files) == ["gate-summary.json", "learnings.json", "manifest.json", "selected-rows.json"]
    assert json.loads(files["selected-rows.json"]) == []
    assert json.loads(files["gate-summary.json"]) == []
    assert json.loads(files["learnings.json"]) == []
    assert validate(manifest, "evidence-manifest")["counts"] == {
        "rows_read": 0,
        "rows_excluded": 0,
        "rows_selected": 0,
        "rows_staged": 0,
        "patches": 0,
        "transcripts": 0,
        "learnings": 0,
        "gate_decisions": 0,
    }
    assert manifest["sources"] == {"results_root": None, "rows": None, "promotion": None, "prior_proposal": None}
    assert manifest["generation"] is None
    assert stat.S_IMODE(destination.stat().st_mode) == 0o700


def test_a_missing_patch_is_simply_not_staged(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    assert "patch-0.diff" not in bundle_files(destination)
    assert json.loads((destination / "selected-rows.json").read_text())[0]["patch_file"] is None
    assert manifest["counts"]["patches"] == 0


def test_an_existing_destination_is_refused_and_left_alone(tmp_path):
    destination = tmp_path / "evidence"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")
    with pytest.raises(EvidenceError, match="already exists"):
        stage(tmp_path, root=None, rows_path=None, destination=destination)
    assert (destination / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize(("folder", "generation"), [("gen2", 1), ("gen1", None), ("sweep", 1)])
def test_a_generation_that_contradicts_the_rows_folder_is_refused(tmp_path, root, folder, generation):
    rows_path = write_rows(root, [make_row("t", INC, 0)], folder=folder)
    with pytest.raises(EvidenceError, match="generation"):
        stage(tmp_path, root=root, rows_path=rows_path, generation=generation)
    assert not (tmp_path / "next" / "evidence").exists()


def test_sweep_rows_stage_with_no_generation(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    manifest, _ = stage(tmp_path, root=root, rows_path=write_rows(root, [row], folder="sweep"), generation=None)
    assert manifest["generation"] is None and manifest["counts"]["transcripts"] == 1


def test_rows_without_a_results_root_or_with_invalid_rows_are_refused(tmp_path, root):
    rows_path = write_rows(root, [make_row("t", INC, 0)])
    with pytest.raises(EvidenceError, match="results_root"):
        stage(tmp_path, root=None, rows_path=rows_path)
    rows_path.write_text(json.dumps({"schema": "result-row/v1", "task": "t"}) + "\n")
    with pytest.raises(EvidenceError, match="not a valid result-row"):
        stage(tmp_path, root=root, rows_path=rows_path)
    assert leftovers(tmp_path / "next") == []


# ─── Limits ─────────────────────────────────────────────────────────────────


def test_a_huge_patch_is_cut_to_its_last_256_kib(tmp_path, root):
    body = b"".join(b"+line %07d\n" % n for n in range(100_000))  # ~1.3 MB
    row = write_cell(root, make_row("t", INC, 0), patch=body)
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    staged = (destination / "patch-0.diff").read_bytes()
    assert staged == body[-MAX_FILE_BYTES:]
    [entry] = [entry for entry in manifest["files"] if entry["name"] == "patch-0.diff"]
    assert entry["truncated"] is True and entry["bytes"] == MAX_FILE_BYTES


def test_a_huge_transcript_is_cut_to_its_last_256_kib_and_still_verified(tmp_path, root):
    payload = big_stream(3 * MAX_FILE_BYTES)
    row = write_cell(root, make_row("t", INC, 0), transcripts=(payload,))
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    assert (destination / "transcript-0-0.jsonl").read_bytes() == payload[-MAX_FILE_BYTES:]
    assert manifest["counts"]["transcripts"] == 1


def test_the_cut_happens_after_redaction_so_no_secret_fragment_survives_the_boundary(tmp_path, root):
    # The canary straddles the point where a raw 256 KiB cut would fall.
    body = b"A" * (MAX_FILE_BYTES * 2) + CANARY.encode() + b"B" * (MAX_FILE_BYTES - 10)
    row = write_cell(root, make_row("t", INC, 0), patch=body)
    _, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    staged = (destination / "patch-0.diff").read_bytes()
    assert len(staged) == MAX_FILE_BYTES
    assert CANARY[-8:].encode() not in staged and CANARY[4:].encode() not in staged
    assert staged.startswith(b"[REDACTED]B")


def test_a_learning_queue_over_the_per_file_limit_fails(tmp_path):
    learnings = [{"skill": "plan", "suggestion": "y" * 10_000} for _ in range(30)]
    with pytest.raises(EvidenceError, match="per-file limit"):
        stage(tmp_path, root=None, rows_path=None, learnings=learnings)
    assert leftovers(tmp_path / "next") == []


def test_an_oversized_prior_proposal_fails(tmp_path):
    proposal = tmp_path / "proposal.md"
    proposal.write_bytes(b"p" * (MAX_FILE_BYTES + 1))
    refusal = rf"prior proposal is {MAX_FILE_BYTES + 1} bytes, over the limit of {MAX_FILE_BYTES} bytes: .*proposal\.md"
    with pytest.raises(EvidenceError, match=refusal):
        stage(tmp_path, root=None, rows_path=None, prior_proposal=proposal)


def test_over_two_mib_rows_are_dropped_from_the_end_with_their_files(tmp_path, root):
    rows = []
    for run in range(12):
        transcript = big_stream(MAX_FILE_BYTES + 4096, marker=chr(ord("a") + run))
        rows.append(
            write_cell(root, make_row("t", INC, run, cost_usd=100.0 - run), patch=b"+x\n", transcripts=(transcript,))
        )
    proposal = tmp_path / "proposal.md"
    proposal.write_text("prior case\n")
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, rows), prior_proposal=proposal)

    files = bundle_files(destination)
    # Seven 256 KiB transcripts fit beside the small files; an eighth would reach 2 MiB on its own.
    assert manifest["counts"]["rows_selected"] == 12
    assert manifest["counts"]["rows_staged"] == 7
    assert manifest["trimmed_rows"] == 5
    assert manifest["prior_proposal_staged"] is True and manifest["prior_proposal_dropped"] is False
    assert sorted(name for name in files if name.startswith("transcript-")) == [
        f"transcript-{i}-0.jsonl" for i in range(7)
    ]
    assert sorted(name for name in files if name.startswith("patch-")) == [f"patch-{i}.diff" for i in range(7)]
    assert [row["run"] for row in json.loads(files["selected-rows.json"])] == list(range(7))
    assert sum(len(payload) for payload in files.values()) <= MAX_BUNDLE_BYTES
    assert manifest["total_bytes"] + len(files["manifest.json"]) == sum(len(payload) for payload in files.values())


def _base_bundle_bytes(tmp_path: Path, learnings: list[dict]) -> int:
    _, destination = stage(
        tmp_path, root=None, rows_path=None, learnings=learnings, destination=tmp_path / "probe" / "evidence"
    )
    return sum(len(payload) for payload in bundle_files(destination).values())


def test_with_every_row_dropped_the_prior_proposal_goes_next(tmp_path, root, monkeypatch):
    learnings = [{"skill": "plan", "note": "n" * 2000}]
    base = _base_bundle_bytes(tmp_path, learnings)
    rows = [write_cell(root, make_row("t", INC, run), patch=b"+" + b"p" * 4000 + b"\n") for run in range(2)]
    proposal = tmp_path / "proposal.md"
    proposal.write_bytes(b"q" * 10_000)
    monkeypatch.setattr(evidence, "MAX_BUNDLE_BYTES", base + 2000)

    manifest, destination = stage(
        tmp_path, root=root, rows_path=write_rows(root, rows), prior_proposal=proposal, learnings=learnings
    )
    assert manifest["trimmed_rows"] == 2 and manifest["counts"]["rows_staged"] == 0
    assert manifest["prior_proposal_staged"] is False and manifest["prior_proposal_dropped"] is True
    assert sorted(bundle_files(destination)) == [
        "gate-summary.json",
        "learnings.json",
        "manifest.json",
        "selected-rows.json",
    ]
    assert json.loads((destination / "selected-rows.json").read_text()) == []


def test_one_row_fits_when_the_budget_allows_exactly_that(tmp_path, root, monkeypatch):
    base = _base_bundle_bytes(tmp_path, [])
    rows = [write_cell(root, make_row("t", INC, run), patch=b"+" + b"p" * 4000 + b"\n") for run in range(3)]
    monkeypatch.setattr(evidence, "MAX_BUNDLE_BYTES", base + 6000)
    manifest, _ = stage(tmp_path, root=root, rows_path=write_rows(root, rows))
    assert manifest["counts"]["rows_staged"] == 1 and manifest["trimmed_rows"] == 2


def test_a_bundle_that_cannot_fit_even_without_rows_and_proposal_fails_and_leaves_nothing(tmp_path, root, monkeypatch):
    rows = [write_cell(root, make_row("t", INC, 0), patch=b"+x\n", transcripts=(stream("x"),))]
    proposal = tmp_path / "proposal.md"
    proposal.write_text("prior\n")
    monkeypatch.setattr(evidence, "MAX_BUNDLE_BYTES", 200)
    with pytest.raises(EvidenceError, match="total byte limit"):
        stage(tmp_path, root=root, rows_path=write_rows(root, rows), prior_proposal=proposal)
    assert leftovers(tmp_path / "next") == []


# ─── Redaction ──────────────────────────────────────────────────────────────


def test_a_canary_secret_is_absent_from_every_staged_file(tmp_path, root):
    transcript = (
        stream(f"I saw {CANARY} in the env", "plain")
        + (compact_json({"type": "user", "headers": {"authorization": "Bearer opaque-value-123"}}) + "\n").encode()
    )
    row = write_cell(
        root,
        make_row(
            "t",
            CAND,
            0,
            resolved=False,
            error_kind="verify-failed",
            verify_output=f"AssertionError: token={CANARY}",
            session_ids=[f"s-{CANARY}"],
        ),
        generation=1,
        patch=f"+API_KEY = '{CANARY}'\n+other = 'sk-ant-abcdefgh12345678'\n".encode(),
        transcripts=(transcript,),
    )
    rows_path = write_rows(root, [row])
    proposal = tmp_path / f"{CANARY}.md"
    proposal.write_text(f"The key {CANARY} leaked in run 0.\n")
    learnings = [{"skill": "plan", "suggestion": f"never print {CANARY}", "token": "opaque"}]

    manifest, destination = stage(
        tmp_path,
        root=root,
        rows_path=rows_path,
        prior_proposal=proposal,
        learnings=learnings,
    )
    files = bundle_files(destination)
    for name, payload in files.items():
        assert CANARY.encode() not in payload, name
        assert b"sk-ant-abcdefgh12345678" not in payload, name
        assert b"opaque-value-123" not in payload, name
    for name in ("patch-0.diff", "transcript-0-0.jsonl", "prior-proposal.md", "selected-rows.json", "learnings.json"):
        assert b"[REDACTED]" in files[name], name
    staged_rows = json.loads(files["selected-rows.json"])
    assert staged_rows[0]["verify_tail"] == "AssertionError: token=[REDACTED]"
    assert json.loads(files["learnings.json"])[0]["token"] == "[REDACTED]"
    assert CANARY not in json.dumps(manifest)
    # Redaction changes the bytes, so the staged digests are of the redacted payloads.
    listed = {entry["name"]: entry for entry in manifest["files"]}
    assert listed["transcript-0-0.jsonl"]["sha256"] == hashlib.sha256(files["transcript-0-0.jsonl"]).hexdigest()


# ─── Refusals ───────────────────────────────────────────────────────────────


def _refused(tmp_path: Path, root: Path, row: dict, match: str) -> None:
    rows_path = write_rows(root, [row])
    with pytest.raises(EvidenceError, match=match):
        stage(tmp_path, root=root, rows_path=rows_path)
    assert not (tmp_path / "next" / "evidence").exists()
    assert leftovers(tmp_path / "next") == []


def _transcript_path(root: Path, row: dict, generation: int | None = None) -> Path:
    return run_folder(root, row, generation) / row["transcript_artifacts"][0]["path"]


def test_a_symlinked_transcript_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    path = _transcript_path(root, row)
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(path.read_bytes())
    elsewhere.chmod(0o600)
    path.unlink()
    path.symlink_to(elsewhere)
    _refused(tmp_path, root, row, rf"regular non-symlink file: .*{path.name}")


def test_a_tampered_transcript_is_refused_by_digest(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("the real words"),))
    path = _transcript_path(root, row)
    path.write_bytes(path.read_bytes().replace(b"real", b"fake"))
    _refused(tmp_path, root, row, rf"SHA-256 does not match.*{path.name}")


def test_a_transcript_of_another_size_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("words"),))
    path = _transcript_path(root, row)
    path.write_bytes(path.read_bytes() + b"\n")
    _refused(tmp_path, root, row, rf"size .* does not match.*{path.name}")


def test_a_group_readable_transcript_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    path = _transcript_path(root, row)
    path.chmod(0o640)
    _refused(tmp_path, root, row, rf"owner-only \(0600\): .*{path.name}")


def test_a_group_readable_transcript_folder_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    _transcript_path(root, row).parent.chmod(0o750)
    _refused(tmp_path, root, row, "transcripts must be owner-only")


def test_a_missing_transcript_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    _transcript_path(root, row).unlink()
    _refused(tmp_path, root, row, "transcript is unavailable")


def test_a_symlinked_patch_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0))
    secret = tmp_path / "secret.txt"
    secret.write_text("host file\n")
    (run_folder(root, row, None) / "patch.diff").symlink_to(secret)
    _refused(tmp_path, root, row, "patch must be a regular non-symlink file")


def test_a_symlinked_run_folder_component_is_refused(tmp_path, root):
    real = tmp_path / "real-cells"
    row = write_cell(real, make_row("t", INC, 0, batch="cache"), transcripts=(stream("x"),))
    (root / "cells").symlink_to(real / "cells")
    _refused(tmp_path, root, row, "must be a real directory")


def _raw_rows(root: Path, row: dict) -> Path:
    """Write a row without validation, as a corrupted or hand-edited results.jsonl would hold it."""
    path = root / "gen1" / "results.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(compact_json(row) + "\n")
    return path


@pytest.mark.parametrize(
    "change",
    [
        {"extra": "key"},
        {"source": "agent-written-transcript"},
        {"path": "transcripts/../../../etc/passwd.jsonl"},
        {"path": "../outside.jsonl"},
        {"path": "/abs/transcripts/x.jsonl"},
    ],
)
def test_bad_transcript_metadata_in_a_results_file_is_refused(tmp_path, root, change):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    row["transcript_artifacts"][0].update(change)
    with pytest.raises(EvidenceError, match="transcript_artifacts"):
        stage(tmp_path, root=root, rows_path=_raw_rows(root, row))
    assert leftovers(tmp_path / "next") == []


GOOD_METADATA = {
    "path": "transcripts/a.jsonl",
    "sha256": "a" * 64,
    "bytes": 10,
    "source": "parent-captured-stream-json",
}


@pytest.mark.parametrize(
    ("metadata", "match"),
    [
        ({**GOOD_METADATA, "extra": 1}, "exactly path, sha256, bytes, source"),
        ({key: value for key, value in GOOD_METADATA.items() if key != "bytes"}, "exactly path"),
        ("transcripts/a.jsonl", "exactly path"),
        ({**GOOD_METADATA, "source": "session-home-transcript"}, "parent-captured"),
        ({**GOOD_METADATA, "path": "transcripts/../a.jsonl"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": "../a.jsonl"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": "/transcripts/a.jsonl"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": "transcripts/sub/a.jsonl"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": "transcripts//a.jsonl"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": "transcripts/a.txt"}, "must be transcripts/<name>.jsonl"),
        ({**GOOD_METADATA, "path": 7}, "path must be a string"),
        ({**GOOD_METADATA, "sha256": "A" * 64}, "sha256"),
        ({**GOOD_METADATA, "bytes": True}, "bytes"),
        ({**GOOD_METADATA, "bytes": 9 * 1024 * 1024}, "bytes"),
    ],
)
def test_the_stager_checks_transcript_metadata_itself(metadata, match):
    # Defence in depth: rows are schema-validated on read, and the stager re-checks every reference.
    with pytest.raises(EvidenceError, match=match):
        evidence._transcript_metadata(metadata, "row 0")


def test_the_stager_accepts_well_formed_metadata():
    assert evidence._transcript_metadata(GOOD_METADATA, "row 0") == ("transcripts/a.jsonl", "a" * 64, 10)


def test_a_duplicate_transcript_reference_is_refused(tmp_path, root):
    row = write_cell(root, make_row("t", INC, 0), transcripts=(stream("x"),))
    row["transcript_artifacts"] = row["transcript_artifacts"] * 2
    _refused(tmp_path, root, validate(row, "result-row"), "listed twice")


def test_a_candidate_row_is_read_from_its_generation_folder_only(tmp_path, root):
    row = write_cell(root, make_row("t", CAND, 0, batch="gen1"), generation=1, transcripts=(stream("candidate"),))
    manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]), generation=1)
    assert (destination / "transcript-0-0.jsonl").read_bytes() == stream("candidate")
    # The same row filed under the shared cells/ folder is not evidence of generation 1.
    shutil.rmtree(destination)
    os.rename(root / "gen1" / "cells", root / "cells")
    _refused(tmp_path, root, row, "run folder .* is missing")


def test_a_failure_while_writing_removes_the_partial_bundle(tmp_path, root, monkeypatch):
    row = write_cell(root, make_row("t", INC, 0), patch=b"+x\n", transcripts=(stream("x"),))
    rows_path = write_rows(root, [row])
    calls = []
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        calls.append(descriptor)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(evidence.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        stage(tmp_path, root=root, rows_path=rows_path)
    assert len(calls) == 3
    assert leftovers(tmp_path / "next") == []


def test_a_destination_that_appears_while_staging_is_not_overwritten(tmp_path, root, monkeypatch):
    destination = tmp_path / "next" / "evidence"
    real_fsync = os.fsync

    def racing_fsync(descriptor):
        real_fsync(descriptor)
        destination.mkdir(exist_ok=True)

    monkeypatch.setattr(evidence.os, "fsync", racing_fsync)
    with pytest.raises(EvidenceError, match="appeared while staging"):
        stage(tmp_path, root=None, rows_path=None, destination=destination)
    assert leftovers(tmp_path / "next") == ["evidence"]
    assert list(destination.iterdir()) == []


def test_a_patch_past_the_source_cap_is_read_from_its_tail_on_a_line_boundary(tmp_path, root, monkeypatch):
    monkeypatch.setattr(evidence, "MAX_SOURCE_BYTES", 1000)
    body = b"".join(b"+line %05d %s\n" % (n, CANARY.encode()) for n in range(200))
    row = write_cell(root, make_row("t", INC, 0), patch=body)
    _, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    staged = (destination / "patch-0.diff").read_bytes()
    assert staged.startswith(b"+line ") and staged.endswith(b"+line 00199 [REDACTED]\n")
    assert CANARY.encode() not in staged
    assert body.replace(CANARY.encode(), b"[REDACTED]").endswith(staged)


def test_a_symlinked_prior_proposal_is_refused(tmp_path):
    target = tmp_path / "host.txt"
    target.write_text("host\n")
    link = tmp_path / "proposal.md"
    link.symlink_to(target)
    with pytest.raises(EvidenceError, match="prior proposal must be a regular non-symlink file"):
        stage(tmp_path, root=None, rows_path=None, prior_proposal=link)
    with pytest.raises(EvidenceError, match="prior proposal is unavailable"):
        stage(tmp_path, root=None, rows_path=None, prior_proposal=tmp_path / "missing.md")
    assert leftovers(tmp_path / "next") == []


def test_the_oracle_log_beside_a_failed_run_never_reaches_the_bundle(tmp_path, root):
    """oracle.log is for the task author: the proposer's evidence holds no oracle output."""
    row = write_cell(
        root,
        make_row("t", INC, 0, resolved=False, error_kind="oracle-failed"),
        patch=b"diff --git a/x b/x\n+change\n",
        transcripts=(stream("x"),),
    )
    secret = "ORACLE-LOG-ONLY assert quote(catalog, 'AB-1', 10) == 2250"
    log = run_folder(root, row, None) / "oracle.log"
    log.write_text(secret)
    log.chmod(0o600)
    _manifest, destination = stage(tmp_path, root=root, rows_path=write_rows(root, [row]))
    staged = b"".join(bundle_files(destination).values())
    assert b"ORACLE-LOG-ONLY" not in staged
    assert all("oracle" not in name for name in bundle_files(destination))


# ─── Review cells: scores reach the proposer, the labels never do ───────────

LABEL_CANARY = "LABELCANARY-q7Wm2"


def canary_labels() -> str:
    """A review-labels/v1 document whose every label field carries the canary."""
    defect = {
        "id": f"{LABEL_CANARY}-D1",
        "path": f"src/{LABEL_CANARY}.py",
        "line_start": 41,
        "line_end": 47,
        "severity": "high",
        "blocking": True,
        "category": LABEL_CANARY.lower().replace("-", "_"),
    }
    document = {"schema": "review-labels/v1", "verdict": "request_changes", "defects": [defect]}
    return json.dumps(validate(document, "review-labels"))


PARTIAL = make_review(
    findings=3,
    tp=1,
    fp=2,
    fn=1,
    precision=1 / 3,
    recall=0.5,
    f1=0.4,
    weighted_precision=0.25,
    weighted_recall=0.5,
    weighted_f1=1 / 3,
    blocker_recall=0.0,
    verdict="comment",
    verdict_correct=False,
)


def test_review_rows_are_never_selected_and_a_compact_row_carries_no_review_scores():
    rows = [
        make_review_row("rv", "review", 1, review=PARTIAL, verify_output=f"missed {LABEL_CANARY}-D1"),
        make_review_row("rv", "review", 2),
        make_row("t", INC, 0, resolved=False, error_kind="oracle-failed"),
    ]
    assert [(row["task"], row["run"]) for row in select_evidence(rows)] == [("t", 0)]
    # Even a review row handed to compact_row directly keeps none of its scores.
    compact = compact_row(rows[0], 0)
    assert "review" not in compact
    plain = compact_row(make_row("t", INC, 0, verify_output="FAILED test_x"), 0)
    assert "review" not in plain and plain["verify_tail"] == "FAILED test_x"


def test_review_scores_are_means_per_task_and_arm_over_valid_runs():
    rows = [
        make_review_row("rv", "review", 0, cost_usd=0.2),
        make_review_row("rv", "review", 1, review=PARTIAL, cost_usd=0.4),
        make_review_row("rv", "review", 2, review=make_review(output_error="review-schema"), cost_usd=0.3),
        make_review_row("rv", "review", 3, resolved=False, error_kind="infra-error", review=None, cost_usd=9.0),
        make_review_row("rv", "candidate_review", 0, resolved=False, error_kind="review-edited-code", cost_usd=None),
        make_review_row("ok", "review", 0, case="clean"),
        make_review_row(
            "ok",
            "review",
            1,
            case="clean",
            review=make_review(
                "clean",
                findings=1,
                fp=1,
                precision=0.0,
                f1=0.0,
                weighted_precision=0.0,
                weighted_f1=0.0,
                verdict="comment",
                verdict_correct=False,
                clean_control_passed=False,
            ),
        ),
        make_row("t", INC, 0),
    ]
    defect, edited, clean = evidence.review_scores(rows)
    assert defect == {
        "task": "rv",
        "arm": "review",
        "runs": 3,
        "scored_runs": 3,
        "resolved": 1,
        "contract_broken": 1,
        "edited_code": 0,
        "mean_weighted_f1": round((1 + 1 / 3 + 0) / 3, 4),
        "mean_recall": 0.5,
        "mean_blocker_recall": round(1 / 3, 4),
        "verdict_correct_share": round(1 / 3, 4),
        "median_cost_usd": 0.3,
    }
    assert (edited["arm"], edited["edited_code"], edited["contract_broken"], edited["median_cost_usd"]) == (
        "candidate_review",
        1,
        0,
        None,
    )
    # A clean control has the same fields, every one a number: nothing says which case it is.
    assert set(clean) == set(defect) and clean["task"] == "ok"
    assert (clean["mean_blocker_recall"], clean["verdict_correct_share"], clean["mean_weighted_f1"]) == (1.0, 0.5, 0.5)
    assert evidence.review_scores([make_row("t", INC, 0)]) == []


def test_review_scores_reach_the_bundle_and_no_label_content_can(tmp_path, root):
    """A canary in every label field, in the suite's labels file, the hidden snapshot and beside the cell, and in
    the grader's words on the row: none of it reaches any file of the bundle, while the scores do."""
    suite = tmp_path / "suite"
    for folder in (suite / "rv", root / "tasks" / "rv" / "oracle", root / "tasks" / "rv"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "review-labels.json").write_text(canary_labels())
    review = b'diff --git a/review-output.json b/review-output.json\n+{"verdict": "comment", "findings": []}\n'
    rows = [
        write_cell(
            root,
            make_review_row(
                "rv",
                "review",
                run,
                review=metrics,
                verify_output=f"labelled {LABEL_CANARY}-D1 at src/{LABEL_CANARY}.py:41-47 was missed",
                error_detail=f"expected request_changes for {LABEL_CANARY}",
            ),
            patch=review,
            transcripts=(stream("reviewing the change"),),
        )
        for run, metrics in enumerate([make_review(), PARTIAL])
    ]
    for row in rows:
        (run_folder(root, row, None) / "review-labels.json").write_text(canary_labels())
    rows_path = write_rows(root, [*rows, make_row("t", INC, 0)])

    manifest, destination = stage(tmp_path, root=root, rows_path=rows_path)

    files = bundle_files(destination)
    assert evidence.REVIEW_SCORES_FILE in files
    assert evidence.REVIEW_SCORES_FILE in {entry["name"] for entry in manifest["files"]}
    for name, payload in files.items():
        assert LABEL_CANARY.encode() not in payload, name
        assert LABEL_CANARY.lower().replace("-", "_").encode() not in payload, name
        assert b"expected_verdict" not in payload and b"blocking_defects" not in payload, name
    [scores] = json.loads(files[evidence.REVIEW_SCORES_FILE])
    assert (scores["task"], scores["arm"], scores["runs"], scores["resolved"]) == ("rv", "review", 2, 1)
    assert scores["mean_weighted_f1"] == round((1 + 1 / 3) / 2, 4)
    # The review runs themselves are not staged: no row, patch or transcript of theirs.
    assert [row["task"] for row in json.loads(files["selected-rows.json"])] == ["t"]
    assert review not in files.values()


def proposer_prompt(tmp_path: Path, root: Path, arm: str) -> Callable[[list[dict], str], str]:
    """Stage ``rows`` into ``tmp_path/<where>/evidence`` and tell the proposer prompt for ``arm`` (code-review)."""
    from skillbench.evolution.proposer import build_prompt

    def prompt(rows: list[dict], where: str) -> str:
        manifest, _ = stage(
            tmp_path, root=root, rows_path=write_rows(root, rows), destination=tmp_path / where / "evidence"
        )
        return build_prompt(
            generation=2,
            manifest=manifest,
            arm_skills={arm: ["code-review"]},
            skills_root=".claude/skills",
            overlay_dir="/workspace/overlay",
            proposal_path="/workspace/proposal.md",
            evidence_dir="/evidence",
        )

    return prompt


def test_a_bundle_without_review_rows_has_no_review_scores_and_its_prompt_says_nothing_of_reviews(tmp_path, root):
    prompt = proposer_prompt(tmp_path, root, "review")
    plain = prompt([make_row("t", INC, 0)], "a")
    assert "review-scores.json" not in plain and "Review quality" not in plain
    assert not (tmp_path / "a" / "evidence" / evidence.REVIEW_SCORES_FILE).exists()
    reviewed = prompt([make_row("t", INC, 0), make_review_row("rv", "review", 0)], "b")
    assert "- Review quality: /evidence/review-scores.json, per review task and arm" in reviewed
    assert "labels they were scored against stay hidden" in reviewed
    # Beside the line on the rows (one more run) and the bundle's index (its markers and sizes), the review line is
    # all that differs.
    differs = [line for line in reviewed.splitlines() if line not in plain.splitlines()]
    assert [line.split(":")[0].split(";")[0] for line in differs if not line.startswith(("<<<", "selected-rows"))] == [
        "- Benchmark runs",
        "- Review quality",
        "review-scores.json [harness-written",
    ]


# ─── Trigger tasks: per-skill figures only ──────────────────────────────────

PROMPT_CANARY = "canary-Pr0mpt-7Hq"
TRIGGER_ARMS = ("trigger", "candidate_trigger")


def trigger_cells(root: Path) -> list[dict]:
    """Rows of both trigger arms over three labelled prompts (the first one's id and prompt text carry a canary),
    each cell's transcript holding its prompt: the candidate never invokes code-review where it is called for."""
    prompts = {  # prompt id -> (label, near miss, the incumbent's invoked skills, the candidate's)
        PROMPT_CANARY: ("code-review", False, ("code-review",), ()),
        "plain-question": (None, False, (), ()),
        "near-miss": (None, True, ("code-review",), ()),
    }
    rows = []
    for prompt, (expect, near, incumbent, candidate) in prompts.items():
        for arm, invoked in zip(TRIGGER_ARMS, (incumbent, candidate), strict=True):
            for run in range(3):
                row = make_trigger_row(
                    prompt,
                    arm,
                    run,
                    expect=expect,
                    near_miss=near,
                    invoked=invoked if run == 0 or prompt == PROMPT_CANARY else (),
                    error_detail=f"the session invoked nothing for {prompt}",
                )
                generation = 1 if arm.startswith("candidate_") else None
                text = stream(f"prompt {prompt}: please review my change", "Skill code-review")
                rows.append(write_cell(root, row, generation=generation, patch=b"", transcripts=(text,)))
    return rows


def trigger_promotion(root: Path, rows: list[dict]) -> Path:
    document = promotion_document(
        rows,
        pairs=[TRIGGER_ARMS],
        policy=None,
        binding=make_binding([TRIGGER_ARMS[1]]),
        run_status="complete",
        generated_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    path = root / "gen1" / "promotion.json"
    write_artifact(path, document, "promotion")
    return path


def test_trigger_rows_are_never_selected_for_the_proposer():
    rows = [
        make_trigger_row("ask", "trigger", 0, expect="code-review"),
        make_trigger_row("ask", "trigger", 1, expect="code-review", invoked=("code-review",), cost_usd=9.0),
        make_row("t", INC, 0, resolved=False),
        make_row("t", INC, 1, cost_usd=2.0),
    ]
    assert [(row["task"], row["run"]) for row in select_evidence(rows)] == [("t", 0), ("t", 1)]


def test_trigger_scores_are_the_aggregates_per_arm_and_skill_and_name_no_prompt():
    rows = [
        make_trigger_row("ask", "trigger", 0, expect="code-review", invoked=("code-review",), cost_usd=0.02),
        make_trigger_row("ask", "trigger", 1, expect="code-review", cost_usd=0.04),
        make_trigger_row("near", "trigger", 0, near_miss=True, invoked=("code-review",), cost_usd=0.03),
        make_row("t", INC, 0),
    ]
    document = evidence.trigger_scores(rows)
    assert validate(document, "trigger-scores") is document
    [score] = document["scores"]
    assert (score["arm"], score["skill"], score["prompts"], score["runs"], score["invoked"]) == (
        "trigger",
        "code-review",
        1,
        2,
        1,
    )
    assert (score["recall"], score["precision"], score["false_triggers"], score["near_miss_restraint"]) == (
        0.5,
        0.5,
        1,
        0.0,
    )
    assert score["cost_per_prompt_usd"] == 0.03
    assert not {"task", "prompt", "expected", "near_miss"} & set(score)
    assert evidence.trigger_scores([make_row("t", INC, 0)]) is None


def test_gate_lines_name_a_trigger_prompt_or_a_review_task_instead_of_its_id_and_leave_other_names_alone():
    lines = [
        "candidate_trigger: keep_incumbent — ask: resolution fell from 3/3 to 0/3; ask-more: 2/3; fix: ok",
        "across agents (all): keep_incumbent — ask (and ask.) again; rv: new false positives on a clean control",
    ]
    standins = {"ask": evidence.TRIGGER_TASK_STANDIN, "rv": evidence.REVIEW_TASK_STANDIN}
    assert evidence.withhold_labelled_tasks(lines, standins) == [
        "candidate_trigger: keep_incumbent — a trigger prompt: resolution fell from 3/3 to 0/3; ask-more: 2/3; fix: ok",
        "across agents (all): keep_incumbent — a trigger prompt (and a trigger prompt.) again; a review task: new "
        "false positives on a clean control",
    ]
    assert evidence.withhold_labelled_tasks(lines, {}) == lines


def test_no_trigger_label_reaches_the_bundle_while_the_per_skill_scores_do(tmp_path, root):
    """A canary in a labelled prompt's id and text, on disk in its cells' transcripts and in the gate's reasons:
    without the prompt's identity nothing can pair it with its label, and none of it reaches any staged file."""
    rows = trigger_cells(root)
    promotion = trigger_promotion(root, rows)
    # The gate itself names the prompt beside the skill whose recall fell by the same counts: its label.
    reasons = " ".join(artifacts_reasons(promotion))
    assert f"{PROMPT_CANARY}: resolution fell from 3/3 to 0/3" in reasons and "code-review triggering" in reasons
    rows_path = write_rows(root, [*rows, make_row("t", INC, 0)])

    manifest, destination = stage(tmp_path, root=root, rows_path=rows_path, promotion_path=promotion)

    files = bundle_files(destination)
    for name, payload in files.items():
        assert PROMPT_CANARY.encode() not in payload, name
        assert PROMPT_CANARY.lower().encode() not in payload, name
        assert b'"expected"' not in payload and b'near_miss"' not in payload, name
    assert [row["task"] for row in json.loads(files["selected-rows.json"])] == ["t"]
    assert manifest["counts"]["transcripts"] == 0
    [summary] = json.loads(files["gate-summary.json"])
    assert "a trigger prompt: resolution fell from 3/3 to 0/3" in summary
    document = validate(json.loads(files[evidence.TRIGGER_SCORES_FILE]), "trigger-scores")
    scores = {(score["arm"], score["skill"]): score for score in document["scores"]}
    assert (scores[("trigger", "code-review")]["recall"], scores[("candidate_trigger", "code-review")]["recall"]) == (
        1.0,
        0.0,
    )
    assert scores[("trigger", "code-review")]["near_miss_false_triggers"] == 1
    assert evidence.TRIGGER_SCORES_FILE in {entry["name"] for entry in manifest["files"]}


def artifacts_reasons(promotion: Path) -> list[str]:
    return [reason for decision in json.loads(promotion.read_text())["decisions"] for reason in decision["reasons"]]


def test_the_prompt_names_the_trigger_scores_and_the_description_only_when_they_are_staged(tmp_path, root):
    prompt = proposer_prompt(tmp_path, root, "trigger")
    plain = prompt([make_row("t", INC, 0)], "a")
    assert "trigger-scores.json" not in plain and "description:" not in plain
    triggered = prompt([make_trigger_row("ask", "trigger", 0, expect="code-review")], "b")
    assert "- Skill triggering: /evidence/trigger-scores.json, per arm and skill" in triggered
    assert "`description:` front matter: you may rewrite it" in triggered
    # With only labelled prompts among the rows, none is staged and the prompt says why (not a harness failure).
    assert (
        "ran label-scored tasks (labelled prompts or reviews), which reach you as aggregate figures only" in triggered
    )
    assert "harness or session errors" not in triggered
