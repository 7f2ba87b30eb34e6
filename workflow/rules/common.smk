# Config, tasks, wildcard constraints, input functions. Everything here runs at parse time,
# so a bad config or task suite fails before any job (and any agent session) starts.
import sys
from pathlib import Path

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "scripts"))

from skillbench import arms as sb_arms  # noqa: E402
from skillbench import breaker as sb_breaker  # noqa: E402
from skillbench import sandbox as sb_sandbox  # noqa: E402
from skillbench import tasks as sb_tasks  # noqa: E402

validate(config, schema="../../schemas/config.schema.json", set_default=True)
sb_arms.check_arms(config)

EXPERIMENT = config["experiment"]
RESULTS = f"results/{EXPERIMENT}"
SUITE = config["tasks"]["suite"]
ALL_TASKS = sb_tasks.load_suite(SUITE)
SELECTION = sb_tasks.select_tasks(
    ALL_TASKS,
    include_expensive=config["tasks"]["include_expensive"],
    only=config["tasks"]["only"],
)
TASKS = {task["id"]: task for task in SELECTION.tasks}
TASK_IDS = list(TASKS)
INCUMBENT_ARMS = sb_arms.selected_arms(config)
RUNS = list(range(config["runs"]))
SKILLS_ROOT = config["skills"]["root"]


wildcard_constraints:
    experiment=EXPERIMENT,
    task="|".join(TASK_IDS),
    arm="[a-z][a-z0-9_]*",
    run=r"\d+",
    gen=r"\d+",


def prepare_run():
    """Fail closed before any session: containment must work. Then reset the outage breaker."""
    if config["sandbox"]["backend"] == "bwrap":
        sb_sandbox.preflight(config["sandbox"]["bwrap"])
    else:
        print(
            "WARNING: sandbox.backend is none: sessions, setup, verify and the oracle run on the host "
            "without containment; rows are stamped sandbox_backend=none and cannot promote.",
            file=sys.stderr,
        )
    sb_breaker.reset(Path(f"{RESULTS}/.outage-breaker.json"))


def get_task_definition(wildcards):
    return TASKS[wildcards.task]


def get_oracle_sources(wildcards):
    suite_dir = Path(SUITE).parent
    return [str(suite_dir / entry["source"]) for entry in TASKS[wildcards.task]["oracle"]["files"]]


def get_snapshot_files(wildcards):
    task = TASKS[wildcards.task]
    if "snapshot" not in task:
        return []
    root = Path(SUITE).parent / task["snapshot"]
    return sorted(str(path) for path in root.rglob("*") if path.is_file())


def get_skill_files(wildcards):
    return sorted(str(path) for path in Path(SKILLS_ROOT).rglob("*") if path.is_file())


def get_model_script(wildcards):
    if config["model"]["provider"] != "scripted":
        return []
    return config["model"]["script"] or str(Path(SUITE).parent / "model-script.yaml")


def get_arm_definition(wildcards):
    return config["arms"][sb_arms.incumbent_of(wildcards.arm)]


def get_session_prompts(wildcards):
    keys = {session["prompt"] for session in get_arm_definition(wildcards)["sessions"]} | {"verify"}
    return {key: config["prompts"][key] for key in sorted(keys) if key in config["prompts"]}


def cell_records(arms, runs=RUNS, tasks=None):
    return [
        f"{RESULTS}/cells/{task}/{arm}/run{run}/record.json"
        for task in (tasks or TASK_IDS)
        for run in runs
        for arm in arms
    ]


def get_final_targets(wildcards):
    """The run's outputs, plus every cell record: a deleted record is then rebuilt (Snakemake does not
    rerun a missing intermediate on its own when everything downstream of it is present)."""
    if config["evolution"]["generations"] == 0:
        return [f"{RESULTS}/sweep/results.jsonl", f"{RESULTS}/sweep/report.md", *cell_records(INCUMBENT_ARMS)]
    raise ValueError("evolution.generations > 0 is not available yet; set it to 0 for a benchmark sweep")
