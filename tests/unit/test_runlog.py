"""Rule logs: an expected error is one redacted line in the log and on stderr; a bug keeps its traceback."""

from __future__ import annotations

import pytest
from skillbench.base.errors import SkillbenchError
from skillbench.base.runlog import rule_log


class _RefusedInput(SkillbenchError, ValueError):
    pass


def test_an_expected_error_is_one_redacted_line_and_the_job_fails(tmp_path, capsys):
    log = tmp_path / "logs" / "rule.log"
    with pytest.raises(SystemExit) as exited, rule_log(log, secrets=["sk-secret-value"]):
        print("working")
        raise _RefusedInput("config tasks.suite: no such file (key sk-secret-value)")
    assert exited.value.code == 1
    text = log.read_text()
    assert text == "working\nerror: config tasks.suite: no such file (key [REDACTED])\n"
    assert capsys.readouterr().err == "error: config tasks.suite: no such file (key [REDACTED])\n"


def test_a_bug_keeps_its_traceback_in_the_log(tmp_path):
    log = tmp_path / "rule.log"
    with pytest.raises(SystemExit), rule_log(log):
        {}["missing"]  # noqa: B018
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'missing'" in text
