"""Hostile inputs that are not the agent: a task repository whose own `.git` plants programs, and strings from a
plugin manifest, a task suite and a config that carry markup — through real snakemake, the real CLI and Bubblewrap.

One run of the demo's money-thousands task, bound from a `repo:` target whose `.git/config` defines smudge,
clean and process filters (selected by `.git/info/attributes` and an in-tree `.gitattributes`), an fsmonitor,
a textconv driver, a pager, hooks and an `include.path`, and which commits a symlink to a host folder and has an
uncommitted change. Two arms: a plugin comparator whose manifest version is an `<img onerror>` payload, and a
baseline. The task class and the model name carry payloads too. Then `snakemake --report`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import uuid
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
import yaml
from conftest import GIT_ENV, REPO, copy_project
from hostile import key_leaks

EXPERIMENT = "hostile-inputs"
# A version that closes the code span a report puts it in, then opens an element.
IMG = "1.0` <img src=x onerror=alert(document.domain)> `"
CLASS = "bug</td><script>alert(1)</script>"
MODEL = "claude-sonnet-4-20250514` `x <javascript:alert(1)>`__"
# The links Snakemake's report writes into the front page itself (its categories and panels).
SNAKEMAKE_NAVIGATION = re.compile(r"^javascript:(app\.show(Category|ResultInfo)|show_panel)\('[A-Za-z0-9_ %./-]*'\)$")
CSP = "Content-Security-Policy"
CSP_VALUE = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
CELL_CSP = re.compile(r"default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; base-uri 'none'; form-action 'none'")


def git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repository), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout


def planted_program(path: Path, canaries: Path, name: str, then: str) -> str:
    """A program that leaves a canary and its whole environment behind when anything runs it."""
    path.write_text(f"#!/bin/sh\nenv > {canaries / name}\n{then}\n")
    path.chmod(0o755)
    return str(path)


def hostile_target(root: Path, canaries: Path, host: Path) -> Path:
    """The demo project as a repository that plants every program git can be made to run, plus a committed
    symlink to a host folder and an uncommitted change."""
    target = root / "hostile-target"
    shutil.copytree(REPO / "tasks" / "demo" / "project", target)
    (target / ".gitattributes").write_text("* filter=x diff=x\n")
    (target / "host-link").symlink_to(host, target_is_directory=True)
    git(target, "init", "-q", "-b", "main")
    git(target, "add", "-A")
    git(target, "commit", "-qm", "task state")
    canaries.mkdir()
    programs = root / "programs"
    programs.mkdir()
    included = programs / "included.gitconfig"
    included.write_text(
        f'[core]\n\tpager = "{planted_program(programs / "pager", canaries, "pager", "cat")}"\n'
        f'[alias]\n\tstatus = "!{planted_program(programs / "included", canaries, "included", "")}"\n'
    )
    with (target / ".git" / "config").open("a") as config:
        config.write(
            f'[filter "x"]\n\tsmudge = "{planted_program(programs / "smudge", canaries, "smudge", "cat")}"\n'
            f'\tclean = "{planted_program(programs / "clean", canaries, "clean", "cat")}"\n'
            f'\tprocess = "{planted_program(programs / "process", canaries, "process", "exit 1")}"\n'
            f'[diff "x"]\n\ttextconv = "{planted_program(programs / "textconv", canaries, "textconv", "cat $1")}"\n'
            f'[core]\n\tfsmonitor = "{planted_program(programs / "fsmonitor", canaries, "fsmonitor", "exit 1")}"\n'
            f"[include]\n\tpath = {included}\n"
        )
    (target / ".git" / "info" / "attributes").write_text("* filter=x diff=x\n")
    for hook in ("post-checkout", "post-index-change", "pre-commit", "reference-transaction", "post-commit"):
        planted_program(target / ".git" / "hooks" / hook, canaries, "hook", "")
    (target / "README.md").write_text("an uncommitted edit\n")
    return target


def hostile_suite(project_root: Path, target: Path) -> None:
    """The demo suite, its money-thousands task bound from `target`, with a task class that carries markup."""
    suite = project_root / "hostile-suite"
    shutil.copytree(REPO / "tasks" / "demo", suite, ignore=shutil.ignore_patterns("project", "plugins", "overlays"))
    document = yaml.safe_load((suite / "tasks.yaml").read_text())
    (task,) = [task for task in document["tasks"] if task["id"] == "money-thousands"]
    del task["snapshot"]
    task.update({"repo": str(target), "class": CLASS})
    document["tasks"] = [task]
    (suite / "tasks.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    script = yaml.safe_load((suite / "model-script-mcp.yaml").read_text())
    del script["tasks"]["money-thousands"]["mcp"]  # this run has no MCP arm
    (suite / "model-script-mcp.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    plugin = project_root / "plugins" / "lookup-kit"
    shutil.copytree(REPO / "tasks" / "demo" / "plugins" / "lookup-kit", plugin)
    manifest = plugin / ".claude-plugin" / "plugin.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "version": IMG}))


def config() -> dict:
    demo = yaml.safe_load((REPO / "config" / "mcp-demo.yaml").read_text())
    prices = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["agent"]["prices"]
    prices["usd_per_mtok"][MODEL] = prices["usd_per_mtok"]["claude-sonnet-4-20250514"]
    return {
        "experiment": EXPERIMENT,
        "runs": 1,
        "tasks": {"suite": "hostile-suite/tasks.yaml", "only": ["money-thousands"]},
        "model": {"name": MODEL, "script": "hostile-suite/model-script-mcp.yaml"},
        "agent": {"attempts": 1, "prices": prices},
        "evolution": {"generations": 0},
        "arms": {
            "plugin_lean": {**demo["arms"]["plugin_lean"], "plugins": ["plugins/lookup-kit"]},
            "baseline_nomcp": demo["arms"]["baseline_nomcp"],
        },
        "prompts": demo["prompts"],
        "selected_arms": ["plugin_lean", "baseline_nomcp"],
        "report": {"baseline_arm": "baseline_nomcp"},
    }


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile-inputs")
    project = copy_project(base / "project")
    host = base / "host-folder"
    host.mkdir()
    (host / "settings.json").write_text('{"host": true}\n')
    canaries = base / "canaries"
    target = hostile_target(base, canaries, host)
    hostile_suite(project.root, target)
    key = f"sk-hostile-inputs-{uuid.uuid4().hex}"
    result = project.snakemake(config=config(), env={"ANTHROPIC_API_KEY": key})
    project.snakemake("--report", "report.html", config=config(), env={"ANTHROPIC_API_KEY": key})
    return {
        "project": project,
        "target": target,
        "host": host,
        "canaries": canaries,
        "key": key,
        "output": result.stdout + result.stderr,
        "rows": {row["arm"]: row for row in project.rows(EXPERIMENT)},
    }


def test_binding_a_hostile_repository_runs_nothing_it_planted_and_grades_it_like_any_task(hostile_run):
    project, target, canaries = hostile_run["project"], hostile_run["target"], hostile_run["canaries"]
    assert sorted(path.name for path in canaries.iterdir()) == []  # no filter, fsmonitor, hook, pager, alias ran
    assert key_leaks([canaries, project.results(EXPERIMENT), project.root / "logs"], hostile_run["key"]) == []
    assert hostile_run["host"].joinpath("settings.json").read_text() == '{"host": true}\n'
    head = git(target, "rev-parse", "HEAD").strip()
    for arm in ("plugin_lean", "baseline_nomcp"):
        row = hostile_run["rows"][arm]
        assert row["error_kind"] is None and row["resolved"], row
        assert row["task_base_sha"] == head and row["class"] == CLASS
    template = project.results(EXPERIMENT, "tasks", "money-thousands", "template")
    assert (template / "host-link").is_symlink() and os.readlink(template / "host-link") == str(hostile_run["host"])
    assert (template / "inventory" / "pricing.py").is_file()
    logs = "\n".join(
        path.read_text() for path in (project.root / "logs").rglob("*") if path.is_file() and "bind_task" in path.parts
    )
    assert re.search(
        rf"warning: task money-thousands: the work tree of {re.escape(str(target))} differs from HEAD "
        r"\([0-9a-f]{12}\), the commit being bound: 1 changed \(README\.md\)",
        logs,
    ), logs


class Markup(HTMLParser):
    """Every element and attribute of an HTML document, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def markup_of(document: str) -> Markup:
    parsed = Markup()
    parsed.feed(document)
    return parsed


def assert_inert(document: str, where: str) -> Markup:
    """No script, no event handler, no javascript: URL but Snakemake's own navigation, no image but the figures."""
    parsed = markup_of(document)
    for tag, attributes in parsed.elements:
        assert tag not in {"script", "iframe", "object", "embed", "form", "svg"}, (where, tag)
        assert not [name for name in attributes if name.startswith("on")], (where, tag, attributes)
        for name in ("href", "src"):
            url = (attributes.get(name) or "").strip()
            assert not url.lower().startswith("javascript:") or SNAKEMAKE_NAVIGATION.match(url), (where, attributes)
        if tag == "img":
            assert (attributes.get("src") or "").startswith("data:image/svg+xml;base64,"), (where, attributes)
    return parsed


def test_markup_in_manifests_suites_and_configs_reaches_the_pages_and_snakemake_report_as_text(hostile_run):
    project = hostile_run["project"]
    html_report = (project.root / "report.html").read_text()
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html_report, re.DOTALL).group(1))
    pages = {
        path: base64.b64decode(entry["data_uri"].split("base64,", 1)[1]).decode()
        for path, entry in results.items()
        if entry["mime_type"] == "text/html"
    }
    assert {f"results/{EXPERIMENT}/sweep/report.html", f"results/{EXPERIMENT}/summary.html"} <= set(pages)
    for path, page in pages.items():
        parsed = assert_inert(page, path)
        policies = [attrs.get("content") for tag, attrs in parsed.elements if attrs.get("http-equiv") == CSP]
        if "/pages/" in path:
            # A cell page has its own, stricter policy: no image at all, only its own stylesheet by hash.
            assert len(policies) == 1 and CELL_CSP.fullmatch(policies[0]), (path, policies)
        else:
            assert policies == [CSP_VALUE], path
        # Nothing comes before the policy but the charset: it governs the whole page.
        assert [tag for tag, _ in parsed.elements[:4]] == ["html", "head", "meta", "meta"], path
        assert parsed.elements[3][1].get("http-equiv") == CSP, path
    sweep = markup_of(pages[f"results/{EXPERIMENT}/sweep/report.html"])
    text = "".join(sweep.text)
    assert IMG in text and CLASS in text and MODEL in text  # shown, as text
    for path, entry in results.items():
        assert_inert(entry.get("caption") or "", f"caption of {path}")
    # The front page (workflow.rst) quotes the model name: a literal, not a link or a raw block.
    description = json.loads(re.search(r"var workflow_desc = (\".*?\");\n", html_report, re.DOTALL).group(1))
    front = assert_inert(description, "the front page")
    assert MODEL.replace("`", "'") in "".join(front.text)
    # The Markdown report itself renders the payloads as text in any viewer, not only through the sanitizer.
    raw = markup_of(
        markdown.markdown(project.results(EXPERIMENT, "sweep", "report.md").read_text(), extensions=["tables"])
    )
    assert not [tag for tag, _ in raw.elements if tag in {"img", "script"}]
