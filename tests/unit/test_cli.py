"""The skillbench command: validate names the first failing path; exit codes a script can rely on."""

from __future__ import annotations

import json

from skillbench.cli import main


def test_validate_accepts_a_valid_artifact(tmp_path, capsys):
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps({"schema": "task-bindings/v1", "suite": "s.yaml", "tasks": [{}],
                                "skipped_expensive": []}))
    assert main(["validate", "task-bindings", str(path)]) == 0
    assert "valid task-bindings" in capsys.readouterr().out


def test_validate_names_the_first_failing_path(tmp_path, capsys):
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps({"schema": "task-bindings/v1", "suite": "s.yaml", "tasks": [],
                                "skipped_expensive": ["x", 3]}))
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
