"""The skillbench command: validate names the first failing path; exit codes a script can rely on."""

from __future__ import annotations

import json

from skillbench.cli import main


def test_validate_accepts_a_valid_artifact(tmp_path, capsys):
    path = tmp_path / "bindings.json"
    path.write_text(
        json.dumps({"schema": "task-bindings/v1", "suite": "s.yaml", "tasks": [{}], "skipped_expensive": []})
    )
    assert main(["validate", "task-bindings", str(path)]) == 0
    assert "valid task-bindings" in capsys.readouterr().out


def test_validate_names_the_first_failing_path(tmp_path, capsys):
    path = tmp_path / "bindings.json"
    path.write_text(
        json.dumps({"schema": "task-bindings/v1", "suite": "s.yaml", "tasks": [], "skipped_expensive": ["x", 3]})
    )
    assert main(["validate", "task-bindings", str(path)]) == 1
    error = capsys.readouterr().err
    assert str(path) in error and "$.skipped_expensive[1]" in error


def test_validate_jsonl_names_the_line(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    path.write_text('{"schema": "result-row/v1"}\n')
    assert main(["validate", "result-row", str(path)]) == 1
    assert "line 1" in capsys.readouterr().err


def test_unknown_kind_and_missing_file(tmp_path, capsys):
    assert main(["validate", "no-such-kind", str(tmp_path / "x.json")]) == 2
    assert "known kinds" in capsys.readouterr().err
    assert main(["validate", "summary", str(tmp_path / "missing.json")]) == 1
    assert "file is missing" in capsys.readouterr().err


def _stored_generation(tmp_path):
    """A generation folder as the pipeline leaves it: rows, overlay.json, ../tasks/bindings.json."""
    from rowfactory import make_overlay, make_row
    from skillbench.base import artifacts

    results = tmp_path / "results" / "demo"
    artifacts.write_artifact(
        results / "tasks" / "bindings.json",
        {
            "schema": "task-bindings/v1",
            "suite": "tasks/demo/tasks.yaml",
            "tasks": [{"id": "t1"}, {"id": "t2"}],
            "skipped_expensive": [],
        },
        "task-bindings",
    )
    gen = results / "gen0"
    artifacts.write_artifact(
        gen / "overlay.json",
        make_overlay(),
        "overlay",
    )
    rows = []
    # A noisy 6 % saving on two tasks with three runs: the median clears the upstream 5 % floor,
    # but three runs cannot tell it from noise.
    for task, costs in (("t1", ([1.0, 1.12, 0.9], [0.95, 0.86, 1.02])), ("t2", ([2.0, 2.3, 1.8], [1.9, 1.7, 2.1]))):
        for run in range(3):
            rows.append(make_row(task, "workflow", run, cost_usd=costs[0][run]))
            rows.append(make_row(task, "candidate_workflow", run, cost_usd=costs[1][run]))
    (gen / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return gen


def test_gate_holds_back_a_flagged_candidate_unless_its_categories_are_accepted(tmp_path, capsys):
    from skillbench.base import artifacts

    gen = _stored_generation(tmp_path)
    overlay = json.loads((gen / "overlay.json").read_text())
    flag = {"file": ".claude/skills/change-work/SKILL.md", "line": 3, "category": "network", "rule": "url"}
    overlay["content_review"] = {
        "rules": "content-review/v1",
        "task_tools": [],
        "flags": [{**flag, "text": "https://x.example.com"}],
        "diff_sha256": "0" * 64,
    }
    artifacts.write_artifact(gen / "overlay.json", overlay, "overlay")
    out = tmp_path / "promotion.json"
    regrade = ["gate", str(gen / "results.jsonl"), "--out", str(out), "--rule", "upstream"]

    assert main(regrade) == 0
    held = json.loads(out.read_text())
    assert held["decisions"][0]["decision"] == "keep_incumbent" and held["content_review"]["held"] is True
    assert "held back by content flags the config does not accept (network: 1" in capsys.readouterr().out
    assert main([*regrade, "--accept-flag", "network"]) == 0
    accepted = json.loads(out.read_text())
    assert accepted["decisions"][0]["decision"] == "promote" and accepted["content_review"]["accepted"] == ["network"]


def test_gate_regrades_with_either_rule_and_the_new_policy_keys(tmp_path, capsys):
    gen = _stored_generation(tmp_path)
    out = tmp_path / "promotion.json"
    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out)]) == 0
    default = json.loads(out.read_text())
    assert default["policy"]["rule"] == "noise_aware"
    assert default["decisions"][0]["decision"] == "keep_incumbent"
    assert "not enough runs to show the resolution" in capsys.readouterr().out
    assert default["error_control"]["generation"] == 0 and default["error_control"]["generation_alpha"] == 0.025

    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--rule", "upstream"]) == 0
    upstream = json.loads(out.read_text())
    assert (upstream["policy"]["rule"], upstream["decisions"][0]["decision"]) == ("upstream", "promote")
    assert "median cost_usd improvement" in capsys.readouterr().out

    assert (
        main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--alpha", "0.4", "--quality-margin-pct", "10"])
        == 0
    )
    loose = json.loads(out.read_text())
    assert (loose["policy"]["alpha"], loose["policy"]["quality_margin_pct"]) == (0.4, 10.0)
    # Generation 0 spends half of alpha; the cost route nine tenths of that.
    assert loose["decisions"][0]["tests"]["cost"]["alpha"] == 0.18
    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--generation-spending", "none"]) == 0
    assert json.loads(out.read_text())["decisions"][0]["tests"]["cost"]["alpha"] == 0.045
    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--generation", "2"]) == 0
    assert json.loads(out.read_text())["error_control"]["generation_alpha"] == 0.00625

    assert main(["gate", str(gen / "results.jsonl"), "--out", str(out), "--alpha", "0.7"]) == 1
    assert "alpha must be a number between 0 and 0.5" in capsys.readouterr().err
