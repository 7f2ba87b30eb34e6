"""A small library's history to mine: one commit of each kind the miner must tell apart.

`make_history(path)` builds it (a real git repository, committed with the test git environment) and returns the
commit ids by name. Newest first, `skillbench tasks mine` sees:

- `round-half`: fixes `mean` (it truncated) and adds a test that fails before: a task;
- `docs`: changes only the README: no test change;
- `clamp-feature`: adds `clamp` and a test module that imports it at the top: only a collection error on the base;
- `leaky-fix`: fixes `span` and its message quotes the fixed line: a commit-message prompt leaks the fix;
- `tests-only`: adds a test of existing behaviour: no source change;
- `refactor`: renames an inner variable, its test passes before and after: no fail-to-pass test;
- `negative-total`: fixes `total` for negative input, with a test: a task;
- `initial`: the library and its first tests (root commit).

Unit and workflow tests import it as `minerepo` (the workflow tests add tests/unit to sys.path).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import gitenv

INITIAL = {
    "README.md": "# statkit\n\nTiny statistics helpers.\n",
    "statkit/__init__.py": "",
    "statkit/core.py": (
        "def total(values):\n"
        "    result = 0\n"
        "    for value in values:\n"
        "        result += abs(value)\n"
        "    return result\n"
        "\n\n"
        "def mean(values):\n"
        "    if not values:\n"
        "        raise ValueError('mean of nothing')\n"
        "    return total(values) // len(values)\n"
        "\n\n"
        "def span(values):\n"
        "    return max(values) - max(values)\n"
    ),
    "tests/test_core.py": (
        "from statkit.core import mean, total\n"
        "\n\n"
        "def test_total_of_positives():\n"
        "    assert total([1, 2, 3]) == 6\n"
        "\n\n"
        "def test_mean_of_equal_values():\n"
        "    assert mean([4, 4]) == 4\n"
    ),
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=gitenv.GIT_ENV
    ).stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for relative, text in files.items():
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def make_history(repo: Path) -> dict[str, str]:
    """Create the repository at `repo`; return {commit name: commit id}."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    commits = {"initial": _commit(repo, INITIAL, "Start statkit with total and mean")}
    core = INITIAL["statkit/core.py"]
    tests = INITIAL["tests/test_core.py"]
    core = core.replace("        result += abs(value)\n", "        result += value\n")
    commits["negative-total"] = _commit(
        repo,
        {
            "statkit/core.py": core,
            "tests/test_core.py": tests + "\n\ndef test_total_keeps_the_sign_of_negative_values():\n"
            "    assert total([-2, 1]) == -1\n",
        },
        "Negative numbers were counted as positive by the sum helper\n\n"
        "Summing a list with negative entries gave the sum of their magnitudes.",
    )
    tests += "\n\ndef test_total_keeps_the_sign_of_negative_values():\n    assert total([-2, 1]) == -1\n"
    core = core.replace(
        "    result = 0\n    for value in values:\n        result += value\n",
        "    acc = 0\n    for value in values:\n        acc += value\n",
    ).replace("    return result\n", "    return acc\n", 1)
    commits["refactor"] = _commit(
        repo,
        {
            "statkit/core.py": core,
            "tests/test_core.py": tests + "\n\ndef test_total_of_nothing():\n    assert total([]) == 0\n",
        },
        "Rename the accumulator in total and cover the empty case",
    )
    tests += "\n\ndef test_total_of_nothing():\n    assert total([]) == 0\n"
    commits["tests-only"] = _commit(
        repo,
        {
            "tests/test_core.py": tests + "\n\ndef test_mean_raises_on_nothing():\n    import pytest\n\n"
            "    with pytest.raises(ValueError):\n        mean([])\n"
        },
        "Cover mean of an empty list",
    )
    tests += (
        "\n\ndef test_mean_raises_on_nothing():\n    import pytest\n\n    with pytest.raises(ValueError):\n"
        "        mean([])\n"
    )
    core = core.replace("    return max(values) - max(values)\n", "    return max(values) - min(values)\n")
    commits["leaky-fix"] = _commit(
        repo,
        {
            "statkit/core.py": core,
            "tests/test_span.py": "from statkit.core import span\n\n\ndef test_span_is_max_minus_min():\n"
            "    assert span([3, 9, 4]) == 6\n",
        },
        "Fix span of a list of values\n\nIt now reads: return max(values) - min(values)",
    )
    core += "\n\ndef clamp(value, low, high):\n    return max(low, min(value, high))\n"
    commits["clamp-feature"] = _commit(
        repo,
        {
            "statkit/core.py": core,
            "tests/test_clamp.py": "from statkit.core import clamp\n\n\ndef test_clamp_inside():\n"
            "    assert clamp(5, 0, 10) == 5\n\n\ndef test_clamp_above():\n    assert clamp(15, 0, 10) == 10\n",
        },
        "Add clamp helper for bounding values to a range",
    )
    commits["docs"] = _commit(
        repo, {"README.md": INITIAL["README.md"] + "\nSee statkit/core.py.\n"}, "Point the README at the code"
    )
    core = core.replace("    return total(values) // len(values)\n", "    return total(values) / len(values)\n")
    commits["round-half"] = _commit(
        repo,
        {
            "statkit/core.py": core,
            "tests/test_core.py": tests + "\n\ndef test_mean_of_uneven_values_keeps_the_fraction():\n"
            "    assert mean([1, 2]) == 1.5\n",
        },
        "The average of two numbers loses its fractional part\n\n"
        "Averaging 1 and 2 gives 1 rather than 1.5, so reports that average small counts are off.",
    )
    return commits


def git(repo: Path, *args: str) -> str:
    """Run git in a fixture repository (the test's own reads)."""
    return _git(repo, *args)


def swebench_instance(repo: Path, commits: dict[str, str]) -> dict[str, object]:
    """The `round-half` fix as a SWE-bench instance of this repository (the fields SWE-bench publishes)."""
    base, fix = commits["docs"], commits["round-half"]
    return {
        "repo": "example/statkit",
        "instance_id": "example__statkit-7",
        "base_commit": base,
        "patch": _git(repo, "diff", base, fix, "--", "statkit") + "\n",
        "test_patch": _git(repo, "diff", base, fix, "--", "tests") + "\n",
        "problem_statement": "mean([1, 2]) returns 1, not 1.5: the average drops its fractional part.",
        "hints_text": "",
        "created_at": "2026-01-01T00:00:00Z",
        "version": "0.1",
        "FAIL_TO_PASS": '["tests/test_core.py::test_mean_of_uneven_values_keeps_the_fraction"]',
        "PASS_TO_PASS": json.dumps(
            ["tests/test_core.py::test_total_of_positives", "tests/test_span.py::test_span_is_max_minus_min"]
        ),
        "environment_setup_commit": base,
    }
