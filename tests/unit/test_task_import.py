"""The importers refuse what they cannot translate, each with one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import minerepo
import pytest
from skillbench import cli
from skillbench.execution import repo
from skillbench.tasksupply import importers
from skillbench.tasksupply.importers import ImportRefused

FIXTURES = Path(__file__).resolve().parents[1] / "workflow" / "suites" / "imports"


def dockerfile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_a_dockerfile_of_a_python_base_and_installs_becomes_setup_checks(tmp_path: Path) -> None:
    plan = importers.docker_plan(
        dockerfile(
            tmp_path,
            "FROM python:3.11-slim\nWORKDIR /app\nRUN apt-get update && apt-get install -y --no-install-recommends \\\n"
            "    git && rm -rf /var/lib/apt/lists/*\nRUN pip install --no-cache-dir pytest==8.0 requests\n"
            'COPY src/ /app/src/\nCMD ["bash"]\n',
        )
    )
    assert plan.workdir == "/app" and plan.apt == ["git"] and plan.pip == ["pytest", "requests"]
    assert plan.copies == [("src/", "src/")]
    setup = importers.setup_command(plan)
    assert setup is not None and "dpkg-query -W git" in setup and '"requests"' in setup


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("FROM node:20\n", 1, "not the image 'node:20'"),
        ("FROM python:3.11\nRUN curl -LsSf https://astral.sh/uv/install.sh | sh\n", 2, "is not an apt-get, pip or npm"),
        ("FROM debian:12\nENV PATH=/opt/x:$PATH\n", 2, "ENV does not translate"),
        ("FROM python:3.11\nWORKDIR /app\nCOPY data.csv /srv/data.csv\n", 3, "copies outside WORKDIR"),
        ("FROM python:3.11\nFROM debian:12\n", 2, "multi-stage"),
        ("FROM python:3.11\nADD https://example.org/x.tgz /app/\n", 2, "a download cannot become the snapshot"),
    ],
)
def test_a_dockerfile_that_cannot_become_setup_is_refused_naming_its_line(
    tmp_path: Path, text: str, line: int, says: str
) -> None:
    with pytest.raises(ImportRefused) as caught:
        importers.docker_plan(dockerfile(tmp_path, text))
    assert f"Dockerfile: line {line} (" in str(caught.value) and says in str(caught.value)


def test_a_harbor_task_without_a_dockerfile_or_verifier_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "instruction.md").write_text("Do it.\n")
    with pytest.raises(ImportRefused, match="environment/Dockerfile: missing"):
        importers.import_harbor(task, {}, tmp_path / "scratch")
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11\n")
    with pytest.raises(ImportRefused, match="tests/test.sh: missing"):
        importers.import_harbor(task, {}, tmp_path / "scratch")


@pytest.mark.parametrize(
    ("grader", "says"),
    [
        ({"type": "llm", "prompt": "Is it good?"}, "field type: llm is a model judge"),
        ({"type": "baseline"}, "field type: baseline is a model judge"),
        ({"type": "tool_used", "tool": "Edit", "max": 0}, "field type: tool_used reads the session's trace"),
        ({"type": "tool_order", "first": "Read", "then": "Edit"}, "tool_order reads the session's trace"),
        ({"type": "regex", "pattern": "done", "target": "last_message"}, "field target: a regex on the last_message"),
        ({"type": "regex", "pattern": "x", "target": "trace"}, "reads the session's transcript"),
        ({"type": "file_exists"}, "field path"),
        ({"type": "sql"}, "unknown grader kind 'sql'"),
    ],
)
def test_a_grader_that_is_not_a_file_check_is_refused_with_one_line(grader: dict, says: str) -> None:
    with pytest.raises(ImportRefused) as caught:
        importers.grader_check("evals/case/graders/g.md", grader)
    message = str(caught.value)
    assert message.startswith("evals/case/graders/g.md: ") and says in message and "\n" not in message


def test_a_plugin_case_without_a_prompt_is_refused(tmp_path: Path) -> None:
    case = tmp_path / "case"
    case.mkdir()
    (case / "case.yaml").write_text("name: x\ngraders: [{type: file_exists, path: a.txt}]\n")
    with pytest.raises(ImportRefused, match="field execution.prompt"):
        importers.import_plugin_case(case)


def test_a_plugin_case_translates_its_file_graders_into_one_check_program() -> None:
    made = importers.import_plugin_case(FIXTURES / "plugin-eval" / "evals" / "greeting-file")
    program = made.files["oracles/greeting-file/checks.py"].decode()
    assert "'file_exists', 'file-written', 'greeting.txt'" in program and "says-hello" in program
    assert made.task["setup"].startswith("bash -c ") and "notes.md" in made.task["setup"]


def write_json(tmp_path: Path, document: object, name: str = "evals.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_trigger_queries_become_trigger_tasks_for_the_skill(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {
            "skill_name": "pdf",
            "evals": [
                {"query": "Fill in this PDF form", "should_trigger": True},
                {"prompt": "What's the weather?", "should_trigger": False},
            ],
        },
    )
    made, skill = importers.import_trigger_queries(path, None)
    assert skill == "pdf"
    assert [item.task["trigger"]["expect"] for item in made] == ["pdf", None]
    assert made[0].script["trigger"][0]["tools"] == [{"name": "Skill", "input": {"skill": "pdf"}}]


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (
            {"skill_name": "pdf", "evals": [{"id": 1, "prompt": "Extract", "expectations": ["has X"]}]},
            "evals[0]: field should_trigger: an output eval",
        ),
        (
            {"skill_name": "pdf", "evals": [{"query": "x", "should_trigger": "yes"}]},
            "evals[0]: field should_trigger: must be true or false",
        ),
        ({"skill_name": "pdf", "evals": [{"query": " ", "should_trigger": True}]}, "evals[0]: field query"),
        ({"skill_name": "Not A Skill", "evals": [{"query": "x", "should_trigger": True}]}, "field skill_name"),
        ({"evals": []}, "field evals"),
    ],
)
def test_skill_creator_evals_it_cannot_translate_are_refused(tmp_path: Path, document: object, says: str) -> None:
    with pytest.raises(ImportRefused) as caught:
        importers.import_trigger_queries(write_json(tmp_path, document), None)
    assert str(caught.value).startswith(str(tmp_path / "evals.json")) and says in str(caught.value)


@pytest.fixture(scope="module")
def statkit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("swe") / "statkit"
    return root, minerepo.make_history(root)


def swebench(statkit: tuple[Path, dict[str, str]], **changes: object) -> importers.Made:
    root, commits = statkit
    instance = {**minerepo.swebench_instance(root, commits), **changes}
    for name, value in list(instance.items()):
        if value is None:
            del instance[name]
    with repo.open_target(root) as reader:
        return importers.import_swebench_instance(Path("instances.json"), instance, root, reader)


def test_a_swebench_instance_becomes_a_task_on_its_base_commit(statkit: tuple[Path, dict[str, str]]) -> None:
    made = swebench(statkit)
    root, commits = statkit
    assert made.task["ref"] == commits["docs"] and made.task["solution"] == {
        "patch": "solutions/example-statkit-7.patch"
    }
    assert "keeps_the_fraction" in made.files["oracles/example-statkit-7/tests/test_core.py"].decode()
    assert made.task["verify"].endswith("tests/test_span.py::test_span_is_max_minus_min")


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"FAIL_TO_PASS": '["test_mean (tests.test_core.MeanTests)"]'}, "field FAIL_TO_PASS: 'test_mean (tests"),
        ({"base_commit": "0" * 40}, "field base_commit: not in --repo"),
        ({"problem_statement": None}, "field problem_statement: missing"),
        ({"FAIL_TO_PASS": "[]"}, "field FAIL_TO_PASS: empty"),
        (
            {"test_patch": "diff --git a/t.bin b/t.bin\nBinary files a/t.bin and b/t.bin differ\n"},
            "field test_patch: the solution changes a binary file",
        ),
    ],
)
def test_a_swebench_instance_it_cannot_translate_is_refused(
    statkit: tuple[Path, dict[str, str]], changes: dict, says: str
) -> None:
    with pytest.raises(ImportRefused) as caught:
        swebench(statkit, **changes)
    assert str(caught.value).startswith("instances.json: instance example__statkit-7: ") and says in str(caught.value)


def test_swebench_needs_its_repository(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = cli.main(["tasks", "import", "--swebench", str(tmp_path / "x.json"), "--out", str(tmp_path / "out")])
    assert code == 1 and "--swebench needs --repo PATH" in capsys.readouterr().err
