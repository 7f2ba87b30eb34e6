# Config, tasks, wildcard constraints, input functions. Everything here runs at parse time,
# so a bad config or task suite fails before any job (and any agent session) starts.
import json
import os
import sys
from functools import cache
from pathlib import Path

# The library beside the workflow's own files: workflow.basedir is the top-level Snakefile's folder, which is the
# consumer's when this workflow is used as a module; current_basedir is this file's folder (workflow/rules).
SCRIPTS = Path(str(workflow.current_basedir)).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from snakemake.settings.types import DeploymentMethod  # noqa: E402

from skillbench.experiment import arms as sb_arms  # noqa: E402
from skillbench.execution import breaker as sb_breaker  # noqa: E402
from skillbench.execution import agents as sb_agents  # noqa: E402
from skillbench.decision import gate as sb_gate  # noqa: E402
from skillbench.execution import environment as sb_environment  # noqa: E402
from skillbench.base import artifacts as sb_artifacts  # noqa: E402
from skillbench.base import layout as sb_layout  # noqa: E402
from skillbench.steps import session as sb_session  # noqa: E402
from skillbench import preflight as sb_preflight  # noqa: E402
from skillbench.base import process as sb_process  # noqa: E402
from skillbench.reporting import progress as sb_progress  # noqa: E402
from skillbench.experiment import runrecord as sb_runrecord  # noqa: E402
from skillbench.experiment import schedule as sb_schedule  # noqa: E402
from skillbench.decision import promotion as sb_promotion  # noqa: E402
from skillbench.experiment import suite as sb_tasks  # noqa: E402
from skillbench.experiment import overlayreview as sb_review  # noqa: E402
from skillbench.experiment import paths as sb_paths  # noqa: E402

# Every check that needs no session, the same list `skillbench check` runs: one line per mistake (with the closest
# valid key for a typo); the full schema report goes to the log, and to the terminal under `snakemake --verbose`.
# They run once per run, in the snakemake that plans it. A cluster job parses this file again (twice: the batch
# job and its job step) to run one job of that plan: it fills the config's defaults and reads what the job's params
# hold (each agent CLI's version), and skips the checks that grow with the suite.
if workflow.is_main_process:
    PREFLIGHT = sb_preflight.check_experiment(
        config,
        config_files=[str(path) for path in workflow.config_settings.configfiles],
        log_path="logs/config-errors.log",
        verbose=bool(getattr(getattr(workflow, "output_settings", None), "verbose", False)),
    )
else:
    PREFLIGHT = sb_preflight.job_preflight(config)
# The version of each agent CLI the arms run: a CLI upgrade reruns only the cells of its arms.
AGENT_VERSIONS = PREFLIGHT.agent_versions

# What a `shell:` step runs its shim with, in the environment every job inherits (a shell command names nothing
# from outside its rule; a param would rerun cells whenever the project moved). The interpreter is the conda
# environment's when rules run in one (`--sdm conda`), else the one running snakemake, which has the library's
# dependencies: the choice Snakemake makes for a `script:` step.
os.environ.update(
    SKILLBENCH_STEP_PYTHON=(
        "python" if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method else sys.executable
    ),
    SKILLBENCH_SCRIPTS=str(SCRIPTS),
)

EXPERIMENT = config["experiment"]
RESULTS = sb_layout.results_root(EXPERIMENT)
# A second run of the experiment while the first lives would die on Snakemake's lock with a traceback: say which
# run holds it instead. A dry-run takes no lock, so it may look at a running experiment.
if workflow.is_main_process and not workflow.output_settings.dryrun:
    _busy = sb_runrecord.busy_message(RESULTS)
    if _busy:
        print(_busy, file=sys.stderr)
        raise SystemExit(1)
for _warning in PREFLIGHT.warnings:
    print(f"WARNING: {_warning}", file=sys.stderr)
SUITE = config["tasks"]["suite"]
ALL_TASKS = PREFLIGHT.suite if PREFLIGHT.suite is not None else sb_tasks.load_suite(SUITE)
SELECTION = sb_tasks.select_tasks(
    ALL_TASKS,
    include_expensive=config["tasks"]["include_expensive"],
    only=config["tasks"]["only"],
)
TASKS = {task["id"]: task for task in SELECTION.tasks}
TASK_IDS = list(TASKS)
TASK_TOOLS = sb_review.suite_task_tools(SELECTION.tasks)
INCUMBENT_ARMS = sb_arms.selected_arms(config)
# A plain integer is the fixed design; {min, max, step} the sequential one, whose first batch (and
# the sweep, and arms in no candidate pair) runs `min` and whose later batches only exist when a look
# says continue (checkpoint gate_look).
RUN_DESIGN = sb_gate.run_design(config["runs"])
SEQUENTIAL = RUN_DESIGN["kind"] == "sequential"
RUNS = list(range(RUN_DESIGN["looks"][0]))
RUNS_TEXT = (
    f"{RUN_DESIGN['looks'][0]} to {RUN_DESIGN['max']} (sequential: looks at {RUN_DESIGN['looks']})"
    if SEQUENTIAL
    else str(RUN_DESIGN["max"])
)
SKILLS_ROOT = config["skills"]["root"]
GENERATIONS = config["evolution"]["generations"]
INITIAL_OVERLAY = config["evolution"]["initial_overlay"]
# evolution.seed_results as the generation folder generation 0's proposer reads (the preflight checked it): an
# experiment folder stands for its last generation with rows; any other value stays as written.
SEED_RESULTS = (
    sb_paths.seed_folder(config["evolution"]["seed_results"])
    if GENERATIONS and not INITIAL_OVERLAY
    else config["evolution"]["seed_results"]
)
CANDIDATE_ARMS = sb_arms.candidate_arms(config)
GENERATION_ARMS = sb_arms.generation_arm_order(INCUMBENT_ARMS, CANDIDATE_ARMS)
# Each generation runs its anchor, fresh cells of every candidate's incumbent arm, beside its candidates (one batch
# per look, in gen<N>/cells); the gate compares a candidate only with them. Generation 0's anchor is the sweep's
# cells of those arms. The other incumbent arms live in the cache (cells/), shared by every generation.
ANCHOR_ARMS = sb_arms.anchor_arms(config)
CACHED_ARMS = sb_arms.cached_arms(config)
# The steps that unblock a generation (stage_evidence, propose_overlay, freeze_overlay, the gates) go before any
# cell that is ready at the same time, so no slot idles on the critical path while the other cells run.
GENERATION_PRIORITY = 10


# The task constraint is the task schema's id pattern, not an alternation of every id: Snakemake matches it for every
# path it resolves, so an alternation would make each match cost as long as the suite is. get_task() names an
# unknown id.
TASK_ID_PATTERN = sb_artifacts.load_schema("task")["properties"]["id"]["pattern"].removeprefix("^").removesuffix("$")


wildcard_constraints:
    task=TASK_ID_PATTERN,
    arm="[a-z][a-z0-9_]*",
    run=r"\d+",
    gen=r"\d+",
    look=r"\d+",
    cellset=sb_layout.CELLSET_PATTERN,


def session_cap():
    """How many sessions may run at once: the agent_sessions cap, or the cores when they are fewer (None: no cap)."""
    caps = [workflow.global_resources.get(name) for name in ("agent_sessions", "_cores")]
    caps = [int(getattr(cap, "value", cap)) for cap in caps if getattr(cap, "value", cap)]
    return min(caps) if caps else None


def prepare_run():
    """Fail closed before any session: containment must work. Then reset the outage breaker and take over
    Ctrl-C (runs after Snakemake's scheduler installed its own SIGTERM handler, which the first Ctrl-C uses)."""
    if config["sandbox"]["backend"] == "bwrap":
        sb_preflight.check_containment(config)
        if workflow.local_exec:
            # Cluster jobs run on nodes of their own: there, the job's allocation (mem_mb) bounds its cells.
            sb_preflight.check_host_memory(config, session_cap() or 1)
    else:
        print(
            "WARNING: sandbox.backend is none: sessions, setup, verify and the oracle run on the host "
            "without containment; rows are stamped sandbox_backend=none and cannot promote.",
            file=sys.stderr,
        )
    sb_breaker.reset(Path(sb_layout.breaker(RESULTS)))
    # First Ctrl-C: running cells finish (their sessions are paid for), nothing new starts; second: stop now.
    sb_process.handle_interrupts()


# Snakemake calls an input, param or resource function once per job, and a suite of N tasks has about 15 N jobs:
# what depends only on an arm or a task is computed once (functools.cache on plain values), never per job.


def get_task(task_id):
    """The selected task `task_id`; a target naming any other task fails here, by name."""
    try:
        return TASKS[task_id]
    except KeyError:
        shown = ", ".join(TASK_IDS[:5]) + (f" and {len(TASK_IDS) - 5} more" if len(TASK_IDS) > 5 else "")
        raise ValueError(f"task {task_id!r} is not a selected task of {SUITE} (selected: {shown})") from None


@cache
def arm_definition(arm):
    return config["arms"][sb_arms.incumbent_of(arm)]


@cache
def cell_runtime(arm):
    sessions = len(arm_definition(arm)["sessions"])
    agent = config["agent"]
    seconds = sessions * agent["session_timeout_s"] + agent["setup_timeout_s"] + 2 * agent["verify_timeout_s"] + 600
    return -(-seconds // 60)


def get_cell_runtime(wildcards):
    """Minutes a cell may take on a cluster: every session, setup, verify and oracle at their limits, plus slack,
    so the scheduler never kills a cell before the cell's own timeouts record what happened."""
    return cell_runtime(wildcards.arm)


@cache
def batch_priorities(gen, look):
    """Each cell's priority in generation `gen`'s batch before look `look`: its drawn start order
    (skillbench.experiment.schedule), over every pair of the experiment."""
    sequential_look = look if SEQUENTIAL else None
    order = sb_schedule.batch_order(
        seed=sb_schedule.batch_seed(EXPERIMENT, gen, sequential_look),
        tasks=TASK_IDS,
        arms=[arm for pair in candidate_pairs() for arm in pair],
        runs=sb_schedule.look_runs(RUN_DESIGN["looks"], look),
    )
    return sb_schedule.start_priorities(order)


def get_cell_priority(wildcards):
    """A generation's cells (its candidates' and its anchor's) start in their batch's drawn order, blocked by task
    (gen<N>/schedule/look<k>.json records it). The cache's cells go run-major: run 0 of every task and arm before
    run 1. Always below GENERATION_PRIORITY: the steps that unblock a generation go first."""
    gen = sb_layout.cellset_generation(wildcards.cellset)
    run = int(wildcards.run)
    if gen is None:
        return 1 - run / (RUN_DESIGN["max"] + 1)
    look = sb_schedule.look_of_run(RUN_DESIGN["looks"], run)
    return batch_priorities(int(gen), look)[(wildcards.task, wildcards.arm, run)]


def get_proposer_runtime(wildcards):
    return -(-(config["agent"]["session_timeout_s"] + 600) // 60)


@cache
def task_definition(task_id):
    return sb_tasks.run_definition(get_task(task_id))


def get_task_definition(wildcards):
    """What a binding and a cell depend on (a param: editing it reruns that task's jobs only)."""
    return task_definition(wildcards.task)


def get_check_definition(wildcards):
    """The whole task, with the fields only the check reads (solution, verify_on_base)."""
    return get_task(wildcards.task)


def get_solution_files(wildcards):
    solution = get_task(wildcards.task).get("solution") or {}
    return [str(Path(SUITE).parent / solution[key]) for key in ("patch", "review") if key in solution]


def get_check_runtime(wildcards):
    agent = config["agent"]
    return -(-(agent["setup_timeout_s"] + 4 * agent["verify_timeout_s"] + 300) // 60)


def task_checks():
    """Every task passed its check (one merged file), as an order-only input: sessions wait for the checks, but a
    re-check that changes nothing (or a check of another task) does not rerun a finished cell."""
    return ancient(sb_layout.task_checks(RESULTS))


def get_oracle_sources(wildcards):
    suite_dir = Path(SUITE).parent
    return [str(suite_dir / entry["source"]) for entry in sb_tasks.hidden_files(get_task(wildcards.task))]


@cache
def snapshot_files(snapshot):
    """Every file of a snapshot folder (tasks of a suite often share one)."""
    root = Path(SUITE).parent / snapshot
    return sorted(str(path) for path in root.rglob("*") if path.is_file())


def get_snapshot_files(wildcards):
    task = get_task(wildcards.task)
    return snapshot_files(task["snapshot"]) if "snapshot" in task else []


@cache
def skill_files():
    return sorted(str(path) for path in Path(SKILLS_ROOT).rglob("*") if path.is_file())


def get_skill_files(wildcards):
    return skill_files()


def get_model_script(wildcards):
    if config["model"]["provider"] != "scripted":
        return []
    return config["model"]["script"] or str(Path(SUITE).parent / "model-script.yaml")


@cache
def session_prompts(arm):
    keys = {session["prompt"] for session in arm_definition(arm)["sessions"]} | {"verify"}
    return {key: config["prompts"][key] for key in sorted(keys) if key in config["prompts"]}


def cell_records(arms, gen=None, runs=None):
    """Record paths in canonical order: task-file order, run-major, arm-minor (in the cache, or of generation `gen`'s
    batch)."""
    return [
        sb_layout.cell_record(RESULTS, sb_layout.cellset(gen), task, arm, run)
        for task in TASK_IDS
        for run in (RUNS if runs is None else range(runs))
        for arm in arms
    ]


def candidate_pairs():
    """(incumbent, candidate) for every candidate arm a generation benchmarks."""
    return [(sb_arms.incumbent_of(candidate), candidate) for candidate in CANDIDATE_ARMS]


def sweep_records():
    """The sweep's cells: the cache's arms, and in an evolution run generation 0's anchor (its first batch), which
    runs beside generation 0's candidates."""
    return cell_records(CACHED_ARMS) + cell_records(ANCHOR_ARMS, 0)


def sweep_schedules():
    return [sb_layout.schedule(RESULTS, 0, 1)] if ANCHOR_ARMS else []


def pair_records(gen, pair_runs):
    """Records a sequential generation needs: both arms of each pair (its candidate and its anchor) up to its runs;
    the cache's arms at `min`."""
    records = cell_records(CACHED_ARMS)
    for pair, runs in pair_runs.items():
        records += cell_records(list(pair), gen, runs=runs)
    return records


def look_pair_runs(gen, look):
    """Runs per (task, arm) each pair has at look `look` of generation `gen`: `min` at the first look;
    then what the previous look said (the next look's runs for a pair that continues, else its last)."""
    if look == 1:
        return {pair: RUN_DESIGN["looks"][0] for pair in candidate_pairs()}
    previous = read_json(checkpoints.gate_look.get(gen=gen, look=look - 1).output.look)
    return {
        (pair["incumbent_arm"], pair["candidate_arm"]): (
            pair["next_runs"] if pair["status"] == "continue" else pair["runs"]
        )
        for pair in previous["pairs"]
    }


def get_look_inputs(wildcards):
    """A look reads every pair's cells so far and the schedules of the batches they ran in."""
    look = int(wildcards.look)
    return {
        "records": pair_records(wildcards.gen, look_pair_runs(wildcards.gen, look)),
        "schedules": [sb_layout.schedule(RESULTS, wildcards.gen, k) for k in range(1, look + 1)],
    }


def get_previous_look(wildcards):
    """The look before a batch: which pairs continue into it (none before the first)."""
    look = int(wildcards.look)
    return [] if look == 1 else [sb_layout.look(RESULTS, wildcards.gen, look - 1)]


def get_schedule_runs(wildcards):
    return list(sb_schedule.look_runs(RUN_DESIGN["looks"], int(wildcards.look)))


def look_chain(gen):
    """Walk generation `gen`'s looks (one checkpoint, a look wildcard) until no pair continues; the
    runs each pair ended with. Walked from the consumers, like generation_chain(), so a resumed run
    re-reads every finished look and re-enters the DAG at the first missing one."""
    for look in range(1, len(RUN_DESIGN["looks"]) + 1):
        document = read_json(checkpoints.gate_look.get(gen=gen, look=look).output.look)
        if not any(pair["status"] == "continue" for pair in document["pairs"]):
            return look, {(pair["incumbent_arm"], pair["candidate_arm"]): pair["runs"] for pair in document["pairs"]}
    raise ValueError(f"{sb_layout.generation_name(gen)}: look {look} still says continue after the last planned look")


def get_gate_inputs(wildcards):
    """The gate reads the generation's rows; a sequential generation also its last look (cut-short pairs)."""
    inputs = {
        "results": sb_layout.rows(RESULTS, wildcards.gen),
        "overlay": sb_layout.overlay(RESULTS, wildcards.gen),
        "bindings": sb_layout.bindings(RESULTS),
    }
    if SEQUENTIAL:
        inputs["look"] = sb_layout.look(RESULTS, wildcards.gen, look_chain(wildcards.gen)[0])
    return inputs


@cache
def cell_inputs(cellset, task, arm):
    candidate = sb_arms.is_candidate(arm)
    generation = sb_layout.cellset_generation(cellset)
    if candidate and generation is None:
        raise ValueError(f"arm {arm} cannot run under {cellset}: candidate arms live in gen<N>/cells")
    if generation is not None and not candidate and arm not in ANCHOR_ARMS:
        raise ValueError(
            f"arm {arm} cannot run under {cellset}: a generation runs its candidates and its anchor "
            f"({', '.join(ANCHOR_ARMS) or 'none'}); other arms live in cells/"
        )
    if sb_arms.incumbent_of(arm) not in INCUMBENT_ARMS:
        raise ValueError(f"arm {arm} is not benchmarked (selected arms: {INCUMBENT_ARMS})")
    get_task(task)
    inputs = {
        "binding": sb_layout.binding(RESULTS, task),
        "template": sb_layout.template(RESULTS, task),
        "oracle": sb_layout.oracle_snapshot(RESULTS, task),
        "skills": skill_files(),
        "model_script": get_model_script(None),
        "checks": task_checks(),
    }
    # Every cell names an overlay input (an incumbent's is empty), so its shell command has one shape.
    inputs["overlay"] = sb_layout.overlay(RESULTS, generation) if candidate else []
    # An anchor cell does not load the candidate, but waits for it and reruns with it: the anchor runs beside the
    # candidate it is compared with, never before (a new candidate is a new batch).
    inputs["batch"] = sb_layout.overlay(RESULTS, generation) if generation is not None and not candidate else []
    return inputs


def get_cell_inputs(wildcards):
    """A cell's inputs; a generation's cells (candidate arms, and the anchor's incumbent arms) also get its frozen
    overlay: the candidates load it. The same for every run of a (cellset, task, arm)."""
    return cell_inputs(wildcards.cellset, wildcards.task, wildcards.arm)


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def generation_records(gen):
    """A generation's cells: its batch (candidates and anchor) and, for context, the cache's arms."""
    if SEQUENTIAL:
        return pair_records(gen, look_chain(gen)[1])
    return cell_records(CACHED_ARMS) + cell_records(ANCHOR_ARMS + CANDIDATE_ARMS, gen)


def generation_schedules(gen):
    looks = look_chain(gen)[0] if SEQUENTIAL else 1
    return [sb_layout.schedule(RESULTS, gen, look) for look in range(1, looks + 1)]


def get_generation_inputs(wildcards):
    return {"records": generation_records(wildcards.gen), "schedules": generation_schedules(wildcards.gen)}


def get_overlay_source(wildcards):
    if int(wildcards.gen) == 0 and INITIAL_OVERLAY:
        return sorted(str(path) for path in Path(INITIAL_OVERLAY).rglob("*") if path.is_file())
    return [sb_layout.proposal(RESULTS, wildcards.gen)]


def get_evidence_inputs(wildcards):
    """Generation N reads generation N-1's rows, gate and proposal; generation 0 reads the seed, if any."""
    gen = int(wildcards.gen)
    if gen == 0:
        return {"seed": [str(Path(SEED_RESULTS) / sb_layout.ROWS)]} if SEED_RESULTS else {}
    inputs = {"results": sb_layout.rows(RESULTS, gen - 1), "promotion": sb_layout.promotion(RESULTS, gen - 1)}
    if not (gen - 1 == 0 and INITIAL_OVERLAY):
        inputs["proposal"] = sb_layout.proposal(RESULTS, gen - 1)
    return inputs


def get_overlay_folder(wildcards):
    if int(wildcards.gen) == 0 and INITIAL_OVERLAY:
        return INITIAL_OVERLAY
    return sb_layout.overlay_draft(RESULTS, wildcards.gen)


def get_candidate_origin(wildcards):
    if int(wildcards.gen) == 0 and INITIAL_OVERLAY:
        return "manual-initial-overlay"
    return "model-proposer"


def get_proposer_model(wildcards):
    if get_candidate_origin(wildcards) == "manual-initial-overlay":
        return None
    return config["evolution"]["proposer_model"] or config["model"]["name"]


def generation_chain():
    """Walk the gate decisions forward until a promotion or evolution.generations (one checkpoint per step)."""
    chain = []
    for gen in range(GENERATIONS):
        chain.append(gen)
        promotion = checkpoints.gate_promotion.get(gen=gen).output.promotion
        if sb_promotion.is_promoted(read_json(promotion)):
            break
    return chain


def get_summary_inputs(wildcards):
    if GENERATIONS == 0:
        return {"results": [sb_layout.rows(RESULTS, None)], "reports": [sb_layout.report(RESULTS, None)]}
    chain = generation_chain()
    return {
        "results": [sb_layout.rows(RESULTS, gen) for gen in chain],
        "reports": [sb_layout.report(RESULTS, gen) for gen in chain],
        "promotions": [sb_layout.promotion(RESULTS, gen) for gen in chain],
        "overlays": [sb_layout.overlay(RESULTS, gen) for gen in chain],
    }


def get_final_targets(wildcards):
    """The run's outputs, plus every cell record: a deleted record is then rebuilt (Snakemake does not
    rerun a missing intermediate on its own when everything downstream of it is present)."""
    targets = [
        sb_layout.summary(RESULTS),
        sb_layout.summary_markdown(RESULTS),
        sb_layout.rows(RESULTS, None),
        sb_layout.report(RESULTS, None),
        *sweep_records(),
    ]
    for gen in generation_chain():
        targets += generation_records(gen)
    return targets


# An arm's MCP servers and plugins change what its sessions can do, so they key its cells' cache.
from skillbench.execution import mcp as sb_mcp  # noqa: E402
from skillbench.execution import plugins as sb_plugins  # noqa: E402


@cache
def arm_extensions(arm):
    definition = config["arms"][sb_arms.incumbent_of(arm)]
    return {
        "mcp_servers": sb_mcp.cache_key(config, definition),
        "plugins": sb_plugins.provenance(sb_plugins.arm_plugins(config, sb_arms.incumbent_of(arm))),
    }


def get_arm_extensions(wildcards):
    """The arm's MCP servers (definitions and mounted-tree digests) and plugins (name, version, digest):
    a change to any of them runs the arm's cells again. Read once per run and arm."""
    return arm_extensions(wildcards.arm)


# ─── Job settings: the config sections a job's library code reads, as one param ───────────────────────────


def job_settings(**sections):
    """Config sections as a param: plain JSON values with sorted keys, so the same config gives the same param
    (Snakemake reruns a job whose params changed) and a second run is a no-op. The agent section leaves out how a
    job is run (retries, the outage streak, the heartbeat): changing those must not pay for sessions again, so
    they reach the job as resources (run_control_resources), which Snakemake does not rerun on."""
    if "agent" in sections:
        sections["agent"] = {
            key: value for key, value in sections["agent"].items() if key not in sb_session.RUN_CONTROL_KEYS
        }
    return json.loads(json.dumps(sections, sort_keys=True))


def run_control_resources():
    """The settings that steer how a session job runs but not what it measures: the agent's retries, outage
    streak and heartbeat, and the spend caps its gateway enforces."""
    return {
        **{key: config["agent"][key] for key in sb_session.RUN_CONTROL_KEYS},
        **{
            name: sb_session.budget_resource(config["budget"][key]) for key, name in sb_session.BUDGET_RESOURCES.items()
        },
    }


def get_budget_cut(wildcards):
    """A cell the run's budget cut short carries the budget as a param, so it runs again once the budget changes;
    every other cell carries nothing, so a new budget reruns no finished cell."""
    run_dir = sb_layout.cell_dir(RESULTS, wildcards.cellset, wildcards.task, wildcards.arm, wildcards.run)
    if not Path(sb_layout.budget_cut_marker(run_dir)).exists():
        return None
    return sb_session.budget_resource(config["budget"]["max_usd"])


@cache
def cli_version(arm):
    return AGENT_VERSIONS.get(sb_agents.arm_agent(config, arm).name)


def get_cli_version(wildcards):
    """The version of the agent CLI the cell's arm runs (found at parse time)."""
    return cli_version(wildcards.arm)


@cache
def cell_settings(arm):
    arm = sb_arms.incumbent_of(arm)
    definition = config["arms"][arm]
    servers = config.get("mcp_servers") or {}
    names = list(servers) if definition.get("no_mcp") else definition.get("mcp_servers") or []
    agent = sb_agents.arm_agent(config, arm).name
    # Another agent's CLI and model reach only that agent's cells (Claude Code's are agent.cli and model.name).
    other_agent = {"agents": {agent: config["agents"][agent]}} if agent in config["agents"] else {}
    return job_settings(
        **other_agent,
        agent=config["agent"],
        arms={arm: definition},
        mcp_servers={name: servers[name] for name in names},
        model=config["model"],
        prompts=session_prompts(arm),
        sandbox=config["sandbox"],
        skills=config["skills"],
        tasks={"suite": SUITE},
    )


def get_cell_settings(wildcards):
    """What a cell reads of the config: a change to any of it runs the cell again. Only the cell's own arm, its
    prompts and its MCP servers (a no-MCP arm sees every server's name: its guidance loses lines about them)."""
    return cell_settings(wildcards.arm)


CHECK_SETTINGS = job_settings(
    agent={key: config["agent"][key] for key in ("setup_timeout_s", "verify_timeout_s")},
    sandbox=config["sandbox"],
)

# The proposer sees the arms it evolves (their skills go into its prompt) and nothing of the others.
EVOLVED_ARMS = [sb_arms.incumbent_of(arm) for arm in CANDIDATE_ARMS]
PROPOSER_SETTINGS = job_settings(
    agent=config["agent"],
    arms={arm: config["arms"][arm] for arm in EVOLVED_ARMS},
    evolution={"arms": EVOLVED_ARMS, "proposer_model": config["evolution"]["proposer_model"]},
    model=config["model"],
    sandbox=config["sandbox"],
    selected_arms=EVOLVED_ARMS,
    skills=config["skills"],
)
