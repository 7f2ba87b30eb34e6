"""The README's "Your own experiment", followed as a new user would: `skillbench init` makes a project folder of the
user's own for their skill and a small library of theirs (not the demo), and every command the tool prints is run
exactly as printed — the scripted model's skeleton, the check, the run, the status, the HTML report — to a first
verdict. Real snakemake (skillbench as a module of the project's Snakefile), the real Claude Code CLI, the scripted
model, Bubblewrap. One run of one task, three runs per arm, one generation of the scripted proposer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import GIT_ENV, RUN_S, TEST_CLI, cli_under_test

SKILLBENCH = str(Path(sys.executable).parent / "skillbench")
ENV = {**os.environ, **GIT_ENV}
SKILL = """\
---
name: verify-first
description: Use when changing code in this repository. Read the code, make the change, then prove it with verify.
---

# verify-first

- Read the files the task names before changing them.
- Make the smallest change that does what the task asks.
- Run the verify command after the last change and report its output.
- Then run the whole test suite again, to be sure nothing else broke.
"""
SLUG = (
    'def slugify(text):\n    """Lower-case words joined by single hyphens."""\n'
    '    return "-".join(text.lower().split(" "))\n'
)
TASKS = {
    "tasks": [
        {
            "id": "slug-spaces",
            "class": "bug",
            "repo": "../wordlib",
            "ref": "before-fix",
            "prompt": 'slugify in wordlib/slug.py turns a run of spaces into several hyphens ("Hello   World" gives '
            '"hello---world"). Make it join the words with single hyphens.',
            "verify": "python3 -m pytest -q -p no:cacheprovider tests/test_slug.py",
            "oracle": {
                "command": 'python3 -m pytest -q -p no:cacheprovider "$SKILLBENCH_ORACLE_ROOT/slug_oracle_test.py"',
                "files": [{"source": "oracles/slug_oracle_test.py", "target": "slug_oracle_test.py"}],
            },
            "solution": {"ref": "fix"},
        }
    ]
}
ORACLE = 'from wordlib.slug import slugify\n\n\ndef test_runs_of_spaces():\n    assert slugify("A   b  C") == "a-b-c"\n'


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, env=ENV)


def user_library(root: Path) -> Path:
    """A small library of the user's: a slug bug at tag before-fix, its fix on branch fix."""
    library = root / "wordlib"
    (library / "wordlib").mkdir(parents=True)
    (library / "tests").mkdir()
    (library / "wordlib" / "__init__.py").write_text("")
    (library / "wordlib" / "slug.py").write_text(SLUG)
    (library / "tests" / "test_slug.py").write_text(
        "from wordlib.slug import slugify\n\n\ndef test_two_words():\n"
        '    assert slugify("Hello World") == "hello-world"\n'
    )
    git(library, "init", "-q", "-b", "main")
    git(library, "add", "-A")
    git(library, "commit", "-qm", "wordlib")
    git(library, "tag", "before-fix")
    git(library, "checkout", "-qb", "fix")
    (library / "wordlib" / "slug.py").write_text(SLUG.replace('split(" ")', "split()"))
    git(library, "commit", "-qam", "fix")
    git(library, "checkout", "-q", "main")
    return library


def printed_commands(output: str) -> list[str]:
    """The commands a `skillbench init` printed, in order (its numbered steps that are commands, comments cut)."""
    found = re.findall(r"^\s+(?:\d+\. )?(/\S+ .*?|/\S+)(?:\s+#.*)?$", output, re.MULTILINE)
    return [command.strip() for command in found]


def run(command: str, cwd: Path, timeout: float = RUN_S) -> subprocess.CompletedProcess:
    """A printed command, exactly as printed (split as a shell would)."""
    return subprocess.run(shlex.split(command), cwd=cwd, capture_output=True, text=True, env=ENV, timeout=timeout)


@pytest.fixture(scope="module")
def first_verdict(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("own")
    user_library(root)
    (root / "my-skills" / "verify-first").mkdir(parents=True)
    (root / "my-skills" / "verify-first" / "SKILL.md").write_text(SKILL)

    made = subprocess.run(
        [SKILLBENCH, "init", str(root / "bench"), "--skills", str(root / "my-skills")],
        cwd=root,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    folder = Path(re.search(r"^  cd (\S+)$", made.stdout, re.MULTILINE).group(1))
    script_init, check, snakemake, status = printed_commands(made.stdout)
    outputs = {"init": made}

    # What a user writes by hand: the task, its hidden oracle, and (after the skeleton) each role's change.
    (folder / "tasks" / "tasks.yaml").write_text(yaml.safe_dump(TASKS, sort_keys=False))
    (folder / "tasks" / "oracles").mkdir()
    (folder / "tasks" / "oracles" / "slug_oracle_test.py").write_text(ORACLE)
    if TEST_CLI:
        config = folder / "config" / "config.yaml"
        config.write_text(config.read_text() + f"agent:\n  cli: {json.dumps(str(cli_under_test()))}\n")
    outputs["script init"] = run(script_init, folder)
    script_path = folder / "tasks" / "model-script.yaml"
    script = yaml.safe_load(script_path.read_text())
    edit = {"name": "Edit", "input": {"file_path": "{{workspace}}/wordlib/slug.py"}}
    edit["input"].update(old_string='split(" ")', new_string="split()")
    script["steps"]["slug-spaces-fix"] = [{"tools": [edit]}]
    for steps in script["tasks"]["slug-spaces"].values():
        steps.insert(steps.index({"use": "slug-spaces-read"}) + 1, {"use": "slug-spaces-fix"})
    script_path.write_text(yaml.safe_dump(script, sort_keys=False))

    outputs["check"] = run(check, folder)
    outputs["run"] = run(snakemake, folder)
    outputs["status"] = run(status, folder)
    closing = outputs["run"].stdout + outputs["run"].stderr
    report = re.search(r"^  HTML:\s+(.+?)\s{3}\(", closing, re.MULTILINE)
    outputs["report"] = run(report.group(1), folder) if report else None
    return {"folder": folder, "outputs": outputs, "commands": [script_init, check, snakemake, status]}


def test_init_makes_a_project_of_ones_own_whose_printed_commands_work_as_printed(first_verdict):
    folder, outputs = first_verdict["folder"], first_verdict["outputs"]
    assert len(first_verdict["commands"]) == 4 and all(
        Path(shlex.split(c)[0]).is_absolute() for c in first_verdict["commands"]
    )
    # The folder is a git repository of its own holding the user's skill, committed; the profile loads by itself.
    assert (folder / ".claude" / "skills" / "verify-first" / "SKILL.md").read_text() == SKILL
    tracked = subprocess.run(["git", "-C", str(folder), "ls-files"], capture_output=True, text=True).stdout.split()
    assert ".claude/skills/verify-first/SKILL.md" in tracked and "Snakefile" in tracked
    assert (folder / "profiles" / "default" / "config.yaml").is_file()
    assert outputs["script init"].returncode == 0, outputs["script init"].stderr
    assert outputs["check"].returncode == 0, outputs["check"].stdout + outputs["check"].stderr
    assert (
        "slug-spaces: base: oracle fails as expected (exit 1); solution: verify and oracle pass"
        in outputs["check"].stdout
    )
    run = outputs["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    assert "Using workflow specific profile profiles/default" in run.stdout + run.stderr
    assert outputs["status"].returncode == 0 and "state: finished;" in outputs["status"].stdout
    assert outputs["report"] is not None and outputs["report"].returncode == 0, outputs["report"]
    assert (folder / "results" / "bench" / "report.html").is_file()


def test_the_first_verdict_names_the_test_that_decided_and_what_would_let_it_decide(first_verdict):
    folder, run = first_verdict["folder"], first_verdict["outputs"]["run"]
    summary = json.loads((folder / "results" / "bench" / "summary.json").read_text())
    assert summary["outcome"] == "not_promoted" and len(summary["generations"]) == 1
    # One task: the cost test has no degree of freedom. The advice says so, not "more generations".
    assert summary["next_step"].startswith("The cost test decided: over 1 gated task(s) it has 0 degree(s)")
    assert "Raise `evolution.generations`" not in (folder / "results" / "bench" / "summary.md").read_text()
    assert "The cost test decided" in run.stderr


def test_only_the_skill_under_test_is_offered_and_the_cell_pages_come_in_one_job_per_folder(first_verdict):
    folder = first_verdict["folder"]
    results = folder / "results" / "bench"
    rows = [json.loads(line) for line in (results / "gen0" / "results.jsonl").read_text().splitlines()]
    assert {row["arm"] for row in rows} == {"skilled", "baseline", "candidate_skilled"}
    for row in rows:
        # Claude Code's bundled skills (verify, debug, …) are switched off: the user's skill alone is listed.
        assert row["offered_skills"] == ["verify-first"], row["offered_skills"]
        assert row["resolved"] is True, row["error_detail"]
    pages = sorted(path.relative_to(results) for path in (results / "pages").rglob("*.html"))
    assert len(pages) == 9 and Path("pages/gen0/cells/slug-spaces/candidate_skilled/run2.html") in pages
    logs = sorted(path.name for path in (folder / "logs" / "bench" / "render_cell_pages").rglob("*.log"))
    assert len(logs) == 2, logs
