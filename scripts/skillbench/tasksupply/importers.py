"""`skillbench tasks import`: task suites from the formats the field uses, translated or refused by name.

- **Harbor task directories** (`instruction.md`, `task.toml`, `environment/Dockerfile`, `tests/`, `solution/`):
  the instruction is the prompt; the build context the Dockerfile copies into its WORKDIR is the snapshot; a
  Dockerfile that reduces to a base image the cell already provides (Debian, Ubuntu, Python) plus `apt-get`/`pip`/
  `npm` installs becomes a `setup` that checks those packages are present (a cell has no network to install
  them); any other line is refused naming it. `tests/` (test.sh and its files) is the hidden oracle: `/tests` is
  where its files are staged, `/logs/verifier` a folder of the run's tmp, WORKDIR the workspace; it passes when
  `reward.txt` says 1 (or, without one, when test.sh exits 0). `solution/solve.sh` runs once, in the sandbox, on
  the snapshot: the change it makes is the reference solution. Harbor tasks have no visible check (`verify: true`).
- **SWE-bench instances** of a repository cloned locally (`--repo`): `base_commit` is the target's ref,
  `problem_statement` the prompt, `patch` the reference solution, `test_patch` applied to the base's test files the
  hidden oracle's files, running `FAIL_TO_PASS` and the `PASS_TO_PASS` tests of those files; the other
  `PASS_TO_PASS` tests (as many as a command holds) are `verify`. Node ids must be pytest's.
- **`claude plugin eval` cases** (a plugin's `evals/`: `case.yaml` and/or `prompt.md`, `scaffold.sh`, graders in
  `case.yaml` or `graders/*.md`): the prompt and the scaffold (as `setup`) make a task on an empty project;
  graders that inspect files (`file_exists`, `regex` on a file) are its `verify` and hidden oracle; graders that
  read the session's trace or last message (`regex` on them, `tool_used`, `tool_order`) and judge graders (`llm`,
  `baseline`) are refused, each with one line.
- **skill-creator trigger queries** (`evals.json`: `[{query, should_trigger}]` or `{skill_name, evals: [...]}`):
  trigger tasks expecting the skill, or none.

Every task passes the task check before the suite is written; the importer writes `model-script.yaml` (replaying
reference solutions; trigger tasks invoke their expected skill) and an experiment file.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skillbench.base import yamltext
from skillbench.base.artifacts import ArtifactError, read_regular_file
from skillbench.base.errors import SkillbenchError
from skillbench.execution import replay, repo
from skillbench.experiment import suite as suites
from skillbench.experiment.settings import check_settings
from skillbench.experiment.suite import MAX_ORACLE_COMMAND_BYTES, MAX_ORACLE_FILES
from skillbench.grading import taskcheck
from skillbench.grading.binding import bind_task
from skillbench.grading.oracle import ORACLE_ENV_VAR
from skillbench.tasksupply import probe, suitefiles

MAX_INPUT_BYTES = 8 * 1024 * 1024
SNAPSHOT = "project"
_NODE_ID = re.compile(r"^[^\s:]+\.py(::\S.*)?$")
ALLOWED_IMAGES = ("debian", "ubuntu", "python", "buildpack-deps")
TRIGGER_PROMPT = (
    "{task}\nThis is a short headless session: if one of your skills is meant for this request, invoke it first, "
    "then stop."
)


class ImportRefused(SkillbenchError, ValueError):
    """Something in the source cannot be translated; the message names the file and the field."""


@dataclass(frozen=True)
class Source:
    """What `skillbench tasks import` was given (exactly one kind)."""

    harbor: tuple[Path, ...] = ()
    swebench: Path | None = None
    repo: Path | None = None
    plugin_eval: Path | None = None
    skill_creator: Path | None = None
    skill: str | None = None

    @property
    def kind(self) -> str:
        if self.harbor:
            return "harbor"
        if self.swebench:
            return "swebench"
        if self.plugin_eval:
            return "plugin-eval"
        return "skill-creator"

    @property
    def origin(self) -> str:
        paths = {
            "harbor": ",".join(str(path.resolve()) for path in self.harbor),
            "swebench": str(self.swebench.resolve()) if self.swebench else "",
            "plugin-eval": str(self.plugin_eval.resolve()) if self.plugin_eval else "",
            "skill-creator": str(self.skill_creator.resolve()) if self.skill_creator else "",
        }
        return f"import-{self.kind}:{paths[self.kind]}"


@dataclass
class Made:
    """One translated task, with the files its suite folder needs and its model-script entry."""

    task: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)  # suite-relative path -> bytes
    script: dict[str, Any] = field(default_factory=lambda: {"replay": replay.REPLAY_SOLUTION})
    folders: dict[str, Path] = field(default_factory=dict)  # suite-relative folder -> a folder to copy


@dataclass(frozen=True)
class Imported:
    """What the import wrote: the lines to print and the commands that check and size the suite."""

    lines: list[str]
    commands: dict[str, str]


def check_source(source: Source) -> None:
    """Options that do not fit together, before anything is read."""
    if source.swebench is not None and source.repo is None:
        raise ImportRefused("--swebench needs --repo PATH: the local clone of the instances' repository")
    if source.repo is not None and source.swebench is None:
        raise ImportRefused("--repo goes with --swebench only")


def _read_text(path: Path, what: str) -> str:
    try:
        return read_regular_file(path, MAX_INPUT_BYTES, what=what).decode("utf-8")
    except FileNotFoundError as exc:
        raise ImportRefused(f"{path}: missing ({what})") from exc
    except (ArtifactError, OSError, UnicodeDecodeError) as exc:
        raise ImportRefused(f"{path}: cannot read {what}: {exc}") from exc


# ─── Harbor ──────────────────────────────────────────────────────────────────


@dataclass
class DockerPlan:
    """What a Dockerfile reduces to: its WORKDIR, the context files it copies there, and the packages it installs."""

    workdir: str = "/app"
    copies: list[tuple[str, str]] = field(default_factory=list)  # (context path, path under WORKDIR)
    apt: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)
    npm: list[str] = field(default_factory=list)


def _docker_lines(text: str) -> list[tuple[int, str]]:
    """Logical instructions with the line number they start on (continuations joined, comments dropped)."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if pending is None and (not stripped or stripped.startswith("#")):
            continue
        start, body = pending if pending else (number, "")
        if stripped.endswith("\\"):
            pending = (start, f"{body} {stripped[:-1].strip()}".strip())
            continue
        pending = None
        lines.append((start, f"{body} {stripped}".strip()))
    if pending:
        lines.append(pending)
    return lines


_APT_FLAGS = {"-y", "-q", "-qq", "--yes", "--no-install-recommends", "--quiet"}
_PIP_FLAGS = {"--no-cache-dir", "-q", "--quiet", "--upgrade", "-U", "--break-system-packages", "--user"}


def _package_name(spec: str) -> str:
    return re.split(r"[<>=!~\[;@ ]", spec, maxsplit=1)[0]


def _run_part(part: str, plan: DockerPlan) -> bool:
    """Take one `&&`-separated command of a RUN line into `plan`; False when it is not an install the cell has."""
    words = shlex.split(part)
    if not words:
        return True
    if words[:2] in (["apt-get", "update"], ["apt", "update"]) or words[:3] == ["rm", "-rf", "/var/lib/apt/lists/*"]:
        return True
    if words[:2] in (["apt-get", "install"], ["apt", "install"]):
        packages = [word for word in words[2:] if word not in _APT_FLAGS]
        if any(word.startswith("-") for word in packages):
            return False
        plan.apt += [package.split("=")[0] for package in packages]
        return True
    pip = None
    if words[:2] in (["pip", "install"], ["pip3", "install"]):
        pip = words[2:]
    elif len(words) > 3 and words[0] in ("python", "python3") and words[1:4] == ["-m", "pip", "install"]:
        pip = words[4:]
    if pip is not None:
        packages = [word for word in pip if word not in _PIP_FLAGS]
        if any(word.startswith("-") for word in packages):
            return False
        plan.pip += [_package_name(package) for package in packages]
        return True
    if words[:2] == ["npm", "install"] and ("-g" in words or "--global" in words):
        plan.npm += [word for word in words[2:] if not word.startswith("-")]
        return True
    return False


def docker_plan(dockerfile: Path) -> DockerPlan:
    """What the Dockerfile reduces to, or ImportRefused naming the first line that does not reduce."""
    plan = DockerPlan()
    seen_from = False
    for number, line in _docker_lines(_read_text(dockerfile, "the Dockerfile")):
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        where = f"{dockerfile}: line {number} ({line[:80]})"
        if instruction == "FROM":
            image = rest.split()[0].split("@")[0].split(":")[0].rsplit("/", 1)[-1] if rest.split() else ""
            if image not in ALLOWED_IMAGES or seen_from:
                raise ImportRefused(
                    f"{where}: the cell provides a Debian system with Python, not the image {rest.strip()!r} (or a "
                    "multi-stage build); give the task a debian, ubuntu or python base, or make it by hand"
                )
            seen_from = True
        elif instruction == "WORKDIR":
            plan.workdir = rest.strip().rstrip("/") or "/"
        elif instruction in ("COPY", "ADD"):
            words = shlex.split(rest)
            if not words or any(word.startswith("--") for word in words) or len(words) < 2:
                raise ImportRefused(f"{where}: only `COPY <context files> <folder>` becomes the snapshot")
            *sources, destination = words
            if any("://" in item for item in sources):
                raise ImportRefused(f"{where}: a download cannot become the snapshot (a cell has no network)")
            target = destination if destination.startswith("/") else f"{plan.workdir}/{destination}"
            folder = target.endswith("/") or len(sources) > 1
            target = target.rstrip("/") or "/"
            if target != plan.workdir and not target.startswith(f"{plan.workdir}/"):
                raise ImportRefused(
                    f"{where}: copies outside WORKDIR {plan.workdir}; only WORKDIR becomes the workspace"
                )
            inside = target[len(plan.workdir) :].lstrip("/") + ("/" if folder and target != plan.workdir else "")
            plan.copies += [(item, inside) for item in sources]
        elif instruction == "RUN":
            for part in re.split(r"&&|;", rest):
                if not _run_part(part.strip(), plan):
                    raise ImportRefused(
                        f"{where}: `{part.strip()[:60]}` is not an apt-get, pip or npm install; a cell runs no build "
                        "step: refused (make the task by hand, or bake the result into the copied files)"
                    )
        elif instruction in ("LABEL", "CMD", "ENTRYPOINT", "EXPOSE"):
            continue
        else:
            raise ImportRefused(f"{where}: {instruction} does not translate into a skillbench task")
    if not seen_from:
        raise ImportRefused(f"{dockerfile}: no FROM line")
    return plan


def setup_command(plan: DockerPlan) -> str | None:
    """A setup that checks the installs the Dockerfile asked for are present (a cell cannot install them)."""
    checks = [f"dpkg-query -W {shlex.quote(package)} >/dev/null" for package in plan.apt]
    checks += [
        "python3 -c " + shlex.quote(f"import importlib.metadata as m; m.version({json.dumps(package)})")
        for package in plan.pip
    ]
    checks += [f"npm ls -g --depth=0 {shlex.quote(package)} >/dev/null" for package in plan.npm]
    return " && ".join(checks) or None


def _copy_context(task_dir: Path, plan: DockerPlan, destination: Path) -> None:
    """The build context's files, where the Dockerfile's COPY lines put them under WORKDIR."""
    context = (task_dir / "environment").resolve()
    destination.mkdir(parents=True)
    for source, inside in plan.copies:
        origin = (context / source).resolve()
        if not origin.is_relative_to(context) or not origin.exists() or origin == context / "Dockerfile":
            raise ImportRefused(f"{context / 'Dockerfile'}: COPY {source}: not a file of the build context")
        target = destination / inside.rstrip("/")
        if origin.is_dir():
            shutil.copytree(origin, target, symlinks=False, dirs_exist_ok=True)
            continue
        # `COPY a.py /app/` and `COPY a.py /app` (WORKDIR itself) keep the name; `COPY a.py /app/b.py` renames.
        into_folder = inside == "" or inside.endswith("/") or target.is_dir()
        final = target / origin.name if into_folder else target
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, final)


def harbor_oracle_command(workdir: str) -> str:
    """Run the staged test.sh with Harbor's paths mapped onto the cell's; pass on reward 1, else on exit 0."""
    logs = '"${TMPDIR:-/tmp}/logs/verifier"'
    script = '"${TMPDIR:-/tmp}/skillbench-test.sh"'
    root = f'"${ORACLE_ENV_VAR}"'
    return (
        f'w="$PWD"; mkdir -p {logs} && '
        f'sed -e "s#/logs/verifier#${{TMPDIR:-/tmp}}/logs/verifier#g" -e "s#/tests\\b#${ORACLE_ENV_VAR}#g" '
        f'-e "s#{workdir}\\b#$w#g" {root}/test.sh > {script} && (cd "$w" && bash {script}); status=$?; '
        f"if [ -f {logs}/reward.txt ]; then awk '{{exit !($1 >= 1)}}' {logs}/reward.txt; else exit $status; fi"
    )


def solve_patch(snapshot: Path, solution_dir: Path, workdir: str, config: dict[str, Any]) -> bytes:
    """Run solve.sh once in the sandbox on a clone of the snapshot; the change it made, as a patch."""
    with tempfile.TemporaryDirectory(prefix="skillbench-harbor-") as scratch:
        template = Path(scratch) / "template"
        repo.build_template(destination=template, snapshot=snapshot)
        fill = functools.partial(repo.clone_template, template)
        with probe.sandbox_over(config, "skillbench-harbor-solve-", fill) as sandbox:
            staged = sandbox.private_root / "solution"
            shutil.copytree(solution_dir, staged)
            inside = "/solution" if sandbox.backend == "bwrap" else str(staged)
            command = (
                f'w="$PWD"; sed -e "s#{workdir}\\b#$w#g" -e "s#/solution\\b#{inside}#g" {inside}/solve.sh '
                '> "${TMPDIR:-/tmp}/solve.sh" && bash "${TMPDIR:-/tmp}/solve.sh"'
            )
            result = sandbox.run(
                ["/bin/sh", "-c", command],
                timeout=float(config["agent"]["setup_timeout_s"]),
                extra_read_only=[(staged, "/solution")] if sandbox.backend == "bwrap" else [],
            )
            if not result.ok:
                raise ImportRefused(
                    f"{solution_dir / 'solve.sh'}: exits {result.returncode} in the sandbox: "
                    f"{(result.stderr_tail or result.stdout_tail)[-300:].strip()}"
                )
            git = sandbox.git()
            repo.checked(git, "add", "--all", "--force")
            diff = git(["diff", "--cached", "--binary", "HEAD"], capture_stdout_bytes=repo.MAX_DIFF_BYTES)
    if not diff.ok or not diff.stdout_capture:
        raise ImportRefused(f"{solution_dir / 'solve.sh'}: changes nothing in the workspace")
    return diff.stdout_capture


def import_harbor(task_dir: Path, config: dict[str, Any], scratch: Path) -> Made:
    """One Harbor task directory as a task (see the module docstring)."""
    task_dir = task_dir.resolve()
    name = suitefiles.slug(task_dir.name, "task")
    prompt = _read_text(task_dir / "instruction.md", "instruction.md")
    metadata: dict[str, Any] = {}
    if (task_dir / "task.toml").is_file():
        try:
            metadata = tomllib.loads(_read_text(task_dir / "task.toml", "task.toml"))
        except tomllib.TOMLDecodeError as exc:
            raise ImportRefused(f"{task_dir / 'task.toml'}: not TOML: {exc}") from exc
    dockerfile = task_dir / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise ImportRefused(f"{dockerfile}: missing; a Harbor task's environment must be a Dockerfile to translate")
    plan = docker_plan(dockerfile)
    tests = task_dir / "tests"
    if not (tests / "test.sh").is_file():
        raise ImportRefused(f"{tests / 'test.sh'}: missing (a Harbor task's verifier)")
    test_files = sorted(path for path in tests.rglob("*") if path.is_file())
    if len(test_files) > MAX_ORACLE_FILES:
        raise ImportRefused(f"{tests}: {len(test_files)} files; a hidden oracle holds at most {MAX_ORACLE_FILES}")
    snapshot = scratch / name / SNAPSHOT
    _copy_context(task_dir, plan, snapshot)
    made = Made(task={}, folders={f"{name}/{SNAPSHOT}": snapshot})
    for path in test_files:
        relative = path.relative_to(tests).as_posix()
        made.files[f"{name}/tests/{relative}"] = path.read_bytes()
    workdir_words = (plan.workdir.rstrip("/") + "/", plan.workdir)
    text = prompt.replace(workdir_words[0], "").replace(workdir_words[1], "the current folder")
    category = str((metadata.get("metadata") or {}).get("category") or "harbor")
    task: dict[str, Any] = {
        "id": name,
        "class": suitefiles.slug(category, "harbor"),
        "snapshot": f"{name}/{SNAPSHOT}",
        "prompt": text.strip() + "\n",
        "verify": "true",
        "oracle": {
            "command": harbor_oracle_command(plan.workdir),
            "files": [
                {
                    "source": f"{name}/tests/{path.relative_to(tests).as_posix()}",
                    "target": path.relative_to(tests).as_posix(),
                }
                for path in test_files
            ],
        },
    }
    setup = setup_command(plan)
    if setup:
        task["setup"] = setup
    solve = task_dir / "solution" / "solve.sh"
    if solve.is_file():
        made.files[f"{name}/solution.patch"] = solve_patch(snapshot, solve.parent, plan.workdir, config)
        task["solution"] = {"patch": f"{name}/solution.patch"}
    else:
        made.script = {"baseline": [{"text": "I could not find what to change."}]}
    made.task = task
    return made


# ─── SWE-bench ───────────────────────────────────────────────────────────────

SWEBENCH_FIELDS = (
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "problem_statement",
)


def read_instances(path: Path) -> list[dict[str, Any]]:
    """SWE-bench instances from a JSON list, one JSON object, or JSON lines."""
    text = _read_text(path, "SWE-bench instances")
    try:
        document = json.loads(text)
        instances = document if isinstance(document, list) else [document]
    except json.JSONDecodeError:
        try:
            instances = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ImportRefused(f"{path}: neither JSON nor JSON lines: {exc}") from exc
    if not instances or not all(isinstance(item, dict) for item in instances):
        raise ImportRefused(f"{path}: expected SWE-bench instances (JSON objects)")
    return instances


def _node_ids(path: Path, instance: str, name: str, value: Any) -> list[str]:
    ids = json.loads(value) if isinstance(value, str) else value
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise ImportRefused(f"{path}: instance {instance}: field {name}: expected a list of test ids")
    for item in ids:
        if not _NODE_ID.match(item):
            raise ImportRefused(
                f"{path}: instance {instance}: field {name}: {item[:80]!r} is not a pytest node id (file.py::test); "
                "only pytest-run repositories translate"
            )
    return ids


def _patched_test_files(
    path: Path, ident: str, test_patch: str, base: str, reader: repo.TargetReader
) -> dict[str, bytes]:
    """The files `test_patch` changes, as it leaves them on `base` (the hidden oracle's files)."""
    try:
        changes = replay.parse_patch(test_patch.encode())
    except replay.ReplayError as exc:
        raise ImportRefused(f"{path}: instance {ident}: field test_patch: {exc}") from exc
    files: dict[str, bytes] = {}
    for change in changes:
        if change.new_path is None:
            continue
        before = ""
        if change.old_path is not None:
            result = reader.git(["cat-file", "blob", f"{base}:{change.old_path}"], capture_stdout_bytes=4 << 20)
            if not result.ok or result.stdout_capture is None:
                raise ImportRefused(f"{path}: instance {ident}: field test_patch: {change.old_path} not at base_commit")
            before = result.stdout_capture.decode("utf-8")
        try:
            files[change.new_path] = replay.apply_hunks(before, change.hunks, path=change.new_path).encode()
        except replay.ReplayError as exc:
            raise ImportRefused(f"{path}: instance {ident}: field test_patch: {exc}") from exc
    if not files or len(files) > MAX_ORACLE_FILES:
        raise ImportRefused(
            f"{path}: instance {ident}: field test_patch: changes {len(files)} files; an oracle holds 1 to "
            f"{MAX_ORACLE_FILES}"
        )
    return files


def import_swebench_instance(path: Path, instance: dict[str, Any], clone: Path, reader: repo.TargetReader) -> Made:
    """One instance as a task on the local clone (see the module docstring)."""
    ident = str(instance.get("instance_id") or "")
    for name in SWEBENCH_FIELDS:
        if name not in instance:
            raise ImportRefused(f"{path}: instance {ident or '?'}: field {name}: missing")
    task_id = suitefiles.slug(ident, "instance")
    try:
        base = reader.resolve(str(instance["base_commit"]))
    except repo.GitError as exc:
        raise ImportRefused(f"{path}: instance {ident}: field base_commit: not in --repo {clone} ({exc})") from exc
    fail_to_pass = _node_ids(path, ident, "FAIL_TO_PASS", instance["FAIL_TO_PASS"])
    pass_to_pass = _node_ids(path, ident, "PASS_TO_PASS", instance["PASS_TO_PASS"])
    if not fail_to_pass:
        raise ImportRefused(f"{path}: instance {ident}: field FAIL_TO_PASS: empty (nothing for the oracle to show)")
    files = _patched_test_files(path, ident, str(instance["test_patch"]), base, reader)
    oracle_ids = fail_to_pass + [node for node in pass_to_pass if node.split("::")[0] in files]
    command = probe.overlay_command("python3 -m pytest", oracle_ids)
    if len(command.encode()) > MAX_ORACLE_COMMAND_BYTES:
        raise ImportRefused(f"{path}: instance {ident}: field FAIL_TO_PASS: too many tests for one oracle command")
    visible = [node for node in pass_to_pass if node.split("::")[0] not in files]
    verify_ids: list[str] = []
    for node in visible:
        if len(probe.pytest_command("python3 -m pytest", [*verify_ids, node]).encode()) > 6000:
            break
        verify_ids.append(node)
    verify = probe.pytest_command("python3 -m pytest", verify_ids) if verify_ids else "true"
    made = Made(task={})
    for relative, payload in files.items():
        made.files[f"oracles/{task_id}/{relative}"] = payload
    made.files[f"solutions/{task_id}.patch"] = str(instance["patch"]).encode()
    made.task = {
        "id": task_id,
        "class": "swe-bench",
        "repo": suitefiles.shown_path(clone),
        "ref": base,
        "prompt": str(instance["problem_statement"]).strip() + "\n",
        "verify": verify,
        "oracle": {
            "command": command,
            "files": [{"source": f"oracles/{task_id}/{relative}", "target": relative} for relative in files],
        },
        "solution": {"patch": f"solutions/{task_id}.patch"},
    }
    return made


# ─── claude plugin eval ──────────────────────────────────────────────────────

TRACE_KINDS = ("tool_used", "tool_order")
JUDGE_KINDS = ("llm", "baseline")
CHECK_PROGRAM = """import glob, re, sys
checks = {checks!r}
failed = []
for kind, name, target, pattern, wanted in checks:
    if kind == "file_exists":
        ok = bool(glob.glob(target, recursive=True))
    else:
        try:
            text = open(target, encoding="utf-8", errors="replace").read()
        except OSError:
            text = None
        found = text is not None and re.search(pattern, text) is not None
        ok = found if wanted else (text is not None and not found)
    if not ok:
        failed.append(name)
print("failed: " + ", ".join(failed) if failed else "all checks pass")
sys.exit(1 if failed else 0)
"""


def _front_matter(path: Path) -> dict[str, Any]:
    text = _read_text(path, "a grader")
    if not text.startswith("---"):
        raise ImportRefused(f"{path}: a grader file starts with YAML front matter (---)")
    block = text.split("---", 2)[1]
    try:
        document = yamltext.safe_load(block) or {}
    except yaml.YAMLError as exc:
        raise ImportRefused(f"{path}: front matter is not YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ImportRefused(f"{path}: front matter must be a mapping")
    return document


def grader_check(where: str, grader: dict[str, Any]) -> tuple[str, str, str, str, bool]:
    """One grader as a file check (kind, name, path or glob, pattern, whether the pattern must match), or refused."""
    kind = grader.get("type") or grader.get("kind")
    name = str(grader.get("name") or where)
    if kind == "file_exists":
        if not isinstance(grader.get("path"), str):
            raise ImportRefused(f"{where}: field path: a file_exists grader needs a path (glob)")
        return ("file_exists", name, grader["path"], "", True)
    if kind == "regex":
        target = grader.get("target")
        if not (isinstance(target, dict) and target.get("source") == "file" and isinstance(target.get("path"), str)):
            raise ImportRefused(
                f"{where}: field target: a regex on the {target or 'last message'} reads the session's transcript; "
                "skillbench grades the workspace (verify and the hidden oracle): check a file instead"
            )
        if not isinstance(grader.get("pattern"), str):
            raise ImportRefused(f"{where}: field pattern: a regex grader needs a pattern")
        wanted = grader.get("match", "contains") != "not_contains"
        return ("regex", name, target["path"], grader["pattern"], wanted)
    if kind in TRACE_KINDS:
        raise ImportRefused(
            f"{where}: field type: {kind} reads the session's trace; skillbench grades the workspace (verify and "
            "the hidden oracle): drop it or check a file instead"
        )
    if kind in JUDGE_KINDS:
        raise ImportRefused(
            f"{where}: field type: {kind} is a model judge; skillbench grades without one (a judge is not a test): "
            "drop it or turn it into a file check"
        )
    raise ImportRefused(f"{where}: field type: unknown grader kind {kind!r}")


def import_plugin_case(case: Path) -> Made:
    """One `claude plugin eval` case folder as a task (see the module docstring)."""
    document: dict[str, Any] = {}
    if (case / "case.yaml").is_file():
        try:
            loaded = yamltext.safe_load(_read_text(case / "case.yaml", "case.yaml"))
        except yaml.YAMLError as exc:
            raise ImportRefused(f"{case / 'case.yaml'}: not YAML: {exc}") from exc
        document = loaded if isinstance(loaded, dict) else {}
    prompt = None
    if (case / "prompt.md").is_file():
        prompt = _read_text(case / "prompt.md", "prompt.md")
    elif isinstance((document.get("execution") or {}).get("prompt"), str):
        prompt = document["execution"]["prompt"]
    if not prompt or not prompt.strip():
        raise ImportRefused(f"{case}: field execution.prompt: no prompt.md and no prompt in case.yaml")
    graders = [
        (f"{case / 'case.yaml'}: graders[{index}]", item) for index, item in enumerate(document.get("graders") or [])
    ]
    for path in sorted((case / "graders").glob("*.md")) if (case / "graders").is_dir() else []:
        graders.append((str(path), {"name": path.stem, **_front_matter(path)}))
    if not graders:
        raise ImportRefused(f"{case}: field graders: a case needs a grader")
    checks = [grader_check(where, item if isinstance(item, dict) else {}) for where, item in graders]
    program = CHECK_PROGRAM.format(checks=checks)
    task_id = suitefiles.slug(str(document.get("name") or case.name), "case")
    scaffold_name = (document.get("context") or {}).get("scaffold_script") or (
        "scaffold.sh" if (case / "scaffold.sh").is_file() else None
    )
    made = Made(task={}, script={"baseline": [{"text": "I looked and found nothing to do."}]})
    made.files[f"{task_id}/{SNAPSHOT}/.gitkeep"] = b""
    made.files[f"oracles/{task_id}/checks.py"] = program.encode()
    made.task = {
        "id": task_id,
        "class": "plugin-eval",
        "snapshot": f"{task_id}/{SNAPSHOT}",
        "prompt": prompt.strip() + "\n",
        "verify": "python3 -c " + shlex.quote(program),
        "oracle": {
            "command": f'python3 "${ORACLE_ENV_VAR}/checks.py"',
            "files": [{"source": f"oracles/{task_id}/checks.py", "target": "checks.py"}],
        },
    }
    if scaffold_name:
        made.task["setup"] = "bash -c " + shlex.quote(_read_text(case / scaffold_name, "the scaffold script"))
    return made


# ─── skill-creator ───────────────────────────────────────────────────────────


def import_trigger_queries(path: Path, skill: str | None) -> tuple[list[Made], str]:
    """skill-creator trigger queries as trigger tasks; returns them and the skill they are about."""
    try:
        document = json.loads(_read_text(path, "evals.json"))
    except json.JSONDecodeError as exc:
        raise ImportRefused(f"{path}: not JSON: {exc}") from exc
    items = document.get("evals") if isinstance(document, dict) else document
    if not isinstance(items, list) or not items:
        raise ImportRefused(f"{path}: field evals: expected a list of trigger queries")
    name = skill or (document.get("skill_name") if isinstance(document, dict) else None)
    if not name and path.parent.name == "evals":
        name = path.parent.parent.name
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", name):
        raise ImportRefused(f"{path}: field skill_name: {name!r} is not a skill name; give --skill NAME")
    made: list[Made] = []
    for index, item in enumerate(items):
        where = f"{path}: evals[{index}]"
        if not isinstance(item, dict):
            raise ImportRefused(f"{where}: expected an object with query and should_trigger")
        query = item.get("query", item.get("prompt"))
        if "should_trigger" not in item:
            if "expectations" in item or "expected_output" in item:
                raise ImportRefused(
                    f"{where}: field should_trigger: an output eval (expectations judged by a model) is not "
                    "translated; only trigger queries are"
                )
            raise ImportRefused(f"{where}: field should_trigger: missing")
        if not isinstance(item["should_trigger"], bool):
            raise ImportRefused(f"{where}: field should_trigger: must be true or false")
        if not isinstance(query, str) or not query.strip():
            raise ImportRefused(f"{where}: field query: missing or blank")
        task_id = f"{index + 1:02d}-{suitefiles.slug(query, 'query')[:40].strip('-')}"
        expect = name if item["should_trigger"] else None
        steps = (
            [{"text": f"This calls for the {name} skill.", "tools": [{"name": "Skill", "input": {"skill": name}}]}]
            if expect
            else [{"text": "No skill is needed for this."}]
        )
        made.append(
            Made(
                task={
                    "id": task_id,
                    "class": "trigger",
                    "snapshot": SNAPSHOT,
                    "prompt": query.strip(),
                    "trigger": {"expect": expect},
                },
                script={"trigger": steps},
            )
        )
    return made, name


# ─── Writing and checking ────────────────────────────────────────────────────


def check_imported(task: dict[str, Any], suite_file: Path, config: dict[str, Any]) -> str:
    """The task check of one imported task: its summary line, or ImportRefused with its first problem."""
    normalised = suites.validate_suite({"tasks": [task]}, suite_file)[0]
    with tempfile.TemporaryDirectory(prefix="skillbench-import-check-") as scratch:
        bound = bind_task(
            normalised, suite=suite_file, template_dir=Path(scratch) / "t", oracle_dir=Path(scratch) / "o"
        )
        document = taskcheck.check_task(
            normalised,
            bound.binding,
            settings=check_settings(config),
            template=Path(scratch) / "t",
            oracle_snapshot=Path(scratch) / "o",
            solution=taskcheck.solution_bytes(normalised, suite_file, bound.binding),
            side_by_side=True,
        )
    if not document["ok"]:
        raise ImportRefused(f"task {task['id']} fails the task check: {document['problems'][0].splitlines()[0]}")
    return str(document["summary"])


def _made_tasks(source: Source, config: dict[str, Any], scratch: Path) -> tuple[list[Made], dict[str, Any]]:
    """The translated tasks and the experiment settings their kind needs."""
    if source.harbor:
        return [import_harbor(folder, config, scratch) for folder in source.harbor], {"selected_arms": ["baseline"]}
    if source.swebench is not None and source.repo is not None:
        instances = read_instances(source.swebench)
        try:
            with repo.open_target(source.repo) as reader:
                made = [import_swebench_instance(source.swebench, item, source.repo, reader) for item in instances]
        except repo.TargetRepositoryError as exc:
            raise ImportRefused(f"--repo {source.repo}: {exc}") from exc
        return made, {}
    if source.plugin_eval is not None:
        folder = source.plugin_eval
        cases = sorted(path for path in folder.iterdir() if path.is_dir() and path.name != "graders")
        if (folder / "case.yaml").is_file() or (folder / "prompt.md").is_file():
            cases = [folder]
        if not cases:
            raise ImportRefused(f"{folder}: no case folders (each with case.yaml or prompt.md)")
        return [import_plugin_case(case) for case in cases], {"selected_arms": ["baseline"]}
    assert source.skill_creator is not None
    made, skill = import_trigger_queries(source.skill_creator, source.skill)
    arms = {
        "trigger": {
            "sessions": [{"role": "trigger", "prompt": "trigger", "tools": ["Read", "Grep", "Glob", "Skill"]}],
            "skills": [skill],
        }
    }
    return made, {
        "arms": arms,
        "selected_arms": ["trigger"],
        "prompts": {"trigger": TRIGGER_PROMPT},
        "report": {"baseline_arm": "trigger"},
    }


def import_suite(source: Source, out: Path, config: dict[str, Any], *, skillbench_command: str) -> Imported:
    """Translate, check every task, then write the suite (nothing is written when anything is refused)."""
    suitefiles.claim(out, source.origin)
    with tempfile.TemporaryDirectory(prefix="skillbench-import-") as scratch_name:
        scratch = Path(scratch_name)
        made, experiment_extra = _made_tasks(source, config, scratch)
        ids = [item.task["id"] for item in made]
        if len(set(ids)) != len(ids):
            raise ImportRefused(f"two imported tasks would share an id ({sorted(ids)}); rename one source")
        staging = scratch / "suite"
        staging.mkdir()
        for item in made:
            for relative, payload in item.files.items():
                suitefiles.write_file(staging / relative, payload)
            for relative, folder in item.folders.items():
                shutil.copytree(folder, staging / relative, dirs_exist_ok=True)
        if source.skill_creator is not None:
            (staging / SNAPSHOT).mkdir(exist_ok=True)
            (staging / SNAPSHOT / "README.md").write_text(
                "A project for trigger prompts: nothing here needs changing.\n"
            )
        lines = [check_imported(item.task, staging / suitefiles.TASKS_FILE, config) for item in made]
        out.mkdir(parents=True, exist_ok=True)
        for entry in staging.iterdir():
            target = out / entry.name
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            shutil.move(str(entry), target)
    name = f"imported-{source.kind}-{suitefiles.slug(out.resolve().name)}"
    paths = suitefiles.write_suite(
        out,
        origin=source.origin,
        tasks=[item.task for item in made],
        script_tasks={item.task["id"]: item.script for item in made},
        experiment=suitefiles.experiment_document(out, name, runs=3, extra=experiment_extra),
        header=f"Imported by `skillbench tasks import --{source.kind}` ({len(made)} task(s)); each passed the check.",
    )
    return Imported(
        lines=[*lines, f"imported {len(made)} task(s) into {paths['tasks']}"],
        commands=suitefiles.commands(paths["experiment"], skillbench_command),
    )
