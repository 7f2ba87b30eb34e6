"""What a `shell:` rule writes into its command as `{value!r:q}` comes back whole in its shim."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from skillbench.base.shellargs import literal, literals
from snakemake.utils import format as snakemake_format

SETTINGS_LIKE = {
    "prompts": {"task": "Fix it.\nDon't 'quote' \"me\" $HOME `id` ; rm -rf / \\ {braces}", "verify": "ünïcode ✓"},
    "limits": {"memory_mb": 2048, "cpu_s": 1.5, "pids": None},
    "flags": [True, False, None],
    "nested": [{"a": [1, 2.25, -3]}, []],
}


@pytest.mark.parametrize("value", [SETTINGS_LIKE, "none", "2.1.0", None, 0.1, 3, [], {}])
def test_a_value_formatted_into_a_shell_command_reads_back_equal(value):
    command = snakemake_format("--settings={value!r:q}", value=value)
    (argument,) = shlex.split(command)
    assert literal(argument.removeprefix("--settings="), "--settings") == value


def test_the_shell_passes_the_literal_through_untouched():
    """Through bash itself, as Snakemake runs a shell step: nothing in the value is expanded or run."""
    command = snakemake_format(
        "{python:q} -c 'import sys; print(sys.argv[1])' {value!r:q}", python=sys.executable, value=SETTINGS_LIKE
    )
    echoed = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=True).stdout
    assert literal(echoed.rstrip("\n"), "value") == SETTINGS_LIKE


def test_run_control_pairs_become_a_dict_and_a_bad_one_is_named():
    assert literals(["attempts=3", "budget_usd='none'", "heartbeat_s=7.5"], "--run-control") == {
        "attempts": 3,
        "budget_usd": "none",
        "heartbeat_s": 7.5,
    }
    with pytest.raises(ValueError, match="--run-control: 'attempts' is not key=value"):
        literals(["attempts"], "--run-control")


def test_something_that_is_not_a_literal_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match="--settings: .* is not a Python literal"):
        literal(f"__import__('pathlib').Path({str(marker)!r}).touch()", "--settings")
    assert not marker.exists()
