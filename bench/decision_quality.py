"""Decision quality of the promotion gate under the noise real runs have: how often each rule promotes.

Simulates paired result rows for known situations — identical candidates (with effects a (task, arm)'s
runs share, heavy tails, heterogeneous per-task effects, flaky tasks, five generations against one cached
incumbent), a real 15 % saving at the design ``skillbench estimate`` recommends for it, a suite where one
task costs ten times the others and gets dearer while the rest get cheaper, a candidate that gives up on
one task, a cheaper candidate that resolves less everywhere, and a dearer one that resolves more — runs
every simulated generation through the gate's own decision function (``skillbench.decision.gate.evaluate_candidate``,
the one the pipeline and ``skillbench gate`` call), and prints the promotion rate with its Monte-Carlo
standard error and the paid sessions per decision.

    .venv/bin/python bench/decision_quality.py                 # 2,000 trials per row; rewrites docs/gate.md
    .venv/bin/python bench/decision_quality.py --trials 300 --no-docs
    .venv/bin/python bench/decision_quality.py --part sequential   # fixed vs sequential designs only
    .venv/bin/python bench/decision_quality.py --part agents       # one candidate across three agent CLIs
    .venv/bin/python bench/decision_quality.py --part review       # review cases: weighted F1, blockers, controls
    .venv/bin/python bench/decision_quality.py --part trigger      # trigger suites: recall, restraint per skill
    .venv/bin/python bench/decision_quality.py --part noise        # arm moments (cached vs anchor), runaways, caps
    .venv/bin/python bench/decision_quality.py --part spend        # the candidate spend tests on the same draws
    .venv/bin/python bench/decision_quality.py --part race         # K candidates per generation under error control
    .venv/bin/python bench/decision_quality.py --json out.json     # the counts, for comparing two versions
    .venv/bin/python bench/decision_quality.py --before old.json   # a "before" column from an older gate's --json

It exits non-zero when a goal is missed. The draws are seeded, so a rerun prints the same table. The bench
also runs against an older gate (``PYTHONPATH=<old checkout>/scripts``, ``--designs`` from the newer run's
``--json`` so both see the same designs; the spend part needs the newer gate): its ``--json`` is then the
``--before`` of the newer run.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.gate import evaluate_candidate, run_design, sequential_decision

try:
    from skillbench.decision.policy import resolve_policy
except ImportError:  # an older gate takes its policy as a dict

    def resolve_policy(policy):
        return dict(policy or {})


INCUMBENT, CANDIDATE = "workflow", "candidate_workflow"
SIGMA = 0.3
BASELINE_SPREAD = 1.0  # task log-cost means are uniform on ±1: tasks differ up to e² ≈ 7× in cost
T_DF = 3
OUTLIER_SHARE, OUTLIER_FACTOR = 0.1, 3.0
DOCS = Path(__file__).resolve().parents[1] / "docs" / "gate.md"
START, END = "<!-- decision-quality:start -->", "<!-- decision-quality:end -->"
SEQ_START, SEQ_END = "<!-- sequential:start -->", "<!-- sequential:end -->"
# The default experiment runs two generations: the power rows are its second (the smaller alpha share).
POWER_GENERATION = 1
SEQUENTIAL_RUNS = {"min": 2, "max": 6, "step": 1}
GENERATIONS_AWARE = "generation" in inspect.signature(evaluate_candidate).parameters


# Designs from another run's --json (the same rows for an older gate, which has no recommendation of its own).
FIXED_DESIGNS: dict[str, list[int]] = {}


def recommended_design(saving_pct: float, *, tasks: int | None, shared_sd: float, generation: int) -> tuple[int, int]:
    """The design ``skillbench estimate`` recommends for the bench's noise (lognormal σ = 0.3, task costs spread over
    ±1 on the log scale): (tasks, runs)."""
    key = f"{saving_pct:g}/{tasks}/{shared_sd:g}/{generation}"
    if key in FIXED_DESIGNS:
        return FIXED_DESIGNS[key][0], FIXED_DESIGNS[key][1]
    from skillbench.reporting.progress import recommend_design

    spread = np.linspace(-BASELINE_SPREAD, BASELINE_SPREAD, 201)
    design = recommend_design(
        saving_pct=saving_pct,
        run_variance=math.exp(SIGMA**2) - 1,
        spend_efficiency=float(np.mean(np.exp(spread)) ** 2 / np.mean(np.exp(2 * spread))),
        shared_sd=shared_sd,
        policy=resolve_policy(None),
        generation=generation,
        tasks=tasks,
    )
    if design is None:
        raise SystemExit(f"no design reaches the power for a {saving_pct}% saving with {tasks} tasks")
    FIXED_DESIGNS[key] = [design["tasks"], design["runs"]]
    return design["tasks"], design["runs"]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    truth: str
    tasks: int
    runs: int
    saving: float = 0.0  # true multiplicative saving on every task (0.15 = 15 % cheaper)
    incumbent_resolves: float = 1.0
    candidate_resolves: float = 1.0
    shared_sd: float = 0.0  # sd of an effect every run of one (task, arm) shares (on the log scale)
    noise: str = "lognormal"
    effect_sd: float = 0.0  # per-task effects drawn around ``saving`` (heterogeneous effects)
    dominant: bool = False  # task 0 costs 10× the others: +15 % there, -20 % elsewhere
    dropped_task: float | None = None  # task 0's candidate resolution (the rest: candidate_resolves)
    generations: int = 1  # > 1: null candidates of that many generations against one cached incumbent
    generation: int = 0
    goal: str = "—"
    goal_max: float | None = None
    goal_min: float | None = None
    design_note: str = ""
    extra: dict = field(default_factory=dict)


def scenarios() -> tuple[Scenario, ...]:
    """The table's rows; the designs of the power rows come from the estimate command's recommendation."""
    k_power, n_power = recommended_design(15.0, tasks=None, shared_sd=0.0, generation=POWER_GENERATION)
    k_shared, n_shared = recommended_design(15.0, tasks=None, shared_sd=0.2, generation=POWER_GENERATION)
    _, n_six = recommended_design(15.0, tasks=6, shared_sd=0.0, generation=0)
    null = {"goal": "≤ 5 %", "goal_max": 0.05}
    return (
        # Identical candidates at designs big enough to show the resolution within the margin (36+ runs per arm):
        # smaller ones are kept out by the quality test alone and would say nothing about the cost test.
        Scenario("N1", "null", "identical, all resolve", 12, 3, **null),
        Scenario("N2", "null, shared τ 0.1", "identical; (task, arm) effects τ = 0.1", 12, 5, shared_sd=0.1, **null),
        Scenario("N3", "null, shared τ 0.2", "identical; (task, arm) effects τ = 0.2", 6, 10, shared_sd=0.2, **null),
        Scenario("N4", "null, shared τ 0.2", "identical; τ = 0.2, more tasks", 24, 3, shared_sd=0.2, **null),
        Scenario("N5", "null, log-t", "identical; log-t noise, 3 df", 12, 3, noise="log-t", **null),
        Scenario("N6", "null, 3× outliers", "identical; 10 % of runs 3×", 12, 3, noise="mixture", **null),
        Scenario("N7", "null, heterogeneous", "per-task effects sd 15 %, mean 0", 10, 5, effect_sd=0.15, **null),
        Scenario("N8", "flaky null", "identical, resolve 90 % / 90 %", 12, 5, 0.0, 0.9, 0.9, **null),
        Scenario(
            "N9",
            "five generations",
            "5 null candidates vs one cached incumbent, τ = 0.2",
            12,
            5,
            shared_sd=0.2,
            generations=5,
            goal="≤ 5 % per experiment",
            goal_max=0.05,
        ),
        Scenario(
            "P1",
            "power",
            "15 % cheaper, all resolve",
            k_power,
            n_power,
            0.15,
            generation=POWER_GENERATION,
            goal="≥ 80 %",
            goal_min=0.80,
            design_note="recommended",
        ),
        Scenario(
            "P2",
            "power, shared τ 0.2",
            "15 % cheaper; τ = 0.2",
            k_shared,
            n_shared,
            0.15,
            shared_sd=0.2,
            generation=POWER_GENERATION,
            design_note="recommended for τ 0.2",
        ),
        Scenario("P3", "power, old design", "15 % cheaper, all resolve", 10, 5, 0.15, generation=POWER_GENERATION),
        Scenario(
            "P4", "flaky power", "15 % cheaper, resolve 90 % / 90 %", k_power, n_power, 0.15, 0.9, 0.9, generation=1
        ),
        Scenario(
            "P5",
            "heterogeneous power",
            "per-task savings 15 % ± 10 %",
            k_power,
            n_power,
            0.15,
            effect_sd=0.10,
            generation=POWER_GENERATION,
        ),
        Scenario(
            "D1",
            "dominant task",
            "task 1 costs 10×: +15 % there, −20 % elsewhere (total +3 %)",
            6,
            n_six,
            dominant=True,
            goal="≤ 5 %",
            goal_max=0.05,
            design_note="recommended for 6 tasks",
        ),
        Scenario(
            "Q1",
            "one task given up",
            "15 % cheaper; one task of 6 resolves 100 % → 75 %",
            6,
            n_six,
            0.15,
            dropped_task=0.75,
            goal="≤ 10 %",
            goal_max=0.10,
            design_note="recommended for 6 tasks",
        ),
        Scenario("Q2", "worse everywhere", "30 % cheaper, resolve 90 % / 75 %", 10, 5, 0.30, 0.9, 0.75),
        Scenario("R1", "dearer, resolves more", "15 % dearer, resolve 80 % / 95 %", 10, 5, -0.15, 0.8, 0.95),
        Scenario(
            "Q3",
            "one task given up",
            "15 % cheaper; one task of 6 resolves 100 % → 75 %",
            6,
            10,
            0.15,
            dropped_task=0.75,
            goal="≤ 10 %",
            goal_max=0.10,
        ),
        # The design the old t recommended for P1, for the power table's before and after.
        Scenario("P6", "power, old recommended design", "15 % cheaper, all resolve", 34, 3, 0.15, generation=1),
    )


def noise(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """Log-scale run-to-run noise."""
    if kind == "lognormal":
        return rng.normal(0.0, SIGMA, shape)
    if kind == "log-t":
        return SIGMA * rng.standard_t(T_DF, shape) / math.sqrt(T_DF / (T_DF - 2))
    if kind == "mixture":
        return rng.normal(0.0, SIGMA, shape) + math.log(OUTLIER_FACTOR) * (rng.random(shape) < OUTLIER_SHARE)
    raise ValueError(kind)


def _arm_rows(arm: str, log_costs: np.ndarray, resolved: np.ndarray) -> list[dict]:
    rows = []
    for task in range(log_costs.shape[0]):
        for run in range(log_costs.shape[1]):
            outcome = bool(resolved[task, run])
            rows.append(
                {
                    "task": f"t{task:02d}",
                    "class": "simulated",
                    "arm": arm,
                    "run": run,
                    "resolved": outcome,
                    "error_kind": None if outcome else "oracle-failed",
                    "cost_usd": float(math.exp(log_costs[task, run])),
                    "sandbox_backend": "bwrap",
                }
            )
    return rows


def draw_arm(
    rng: np.random.Generator, scenario: Scenario, base: np.ndarray, effects: np.ndarray, rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One arm's log costs and outcomes: task level + the arm's effect + what its runs share + run noise."""
    shape = (scenario.tasks, scenario.runs)
    shared = rng.normal(0.0, scenario.shared_sd, (scenario.tasks, 1)) if scenario.shared_sd else 0.0
    log_costs = base[:, None] + effects[:, None] + shared + noise(rng, scenario.noise, shape)
    return log_costs, rng.random(shape) < rates[:, None]


def draw_suite(rng: np.random.Generator, scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Task log-cost levels and the candidate's true per-task log effect."""
    if scenario.dominant:
        base = np.zeros(scenario.tasks)
        base[0] = math.log(10)
        effects = np.full(scenario.tasks, math.log(0.8))
        effects[0] = math.log(1.15)
        return base, effects
    base = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, scenario.tasks)
    effects = np.full(scenario.tasks, math.log(1 - scenario.saving))
    if scenario.effect_sd:
        effects = effects + rng.normal(0.0, scenario.effect_sd, scenario.tasks)
    return base, effects


def candidate_rates(scenario: Scenario) -> np.ndarray:
    rates = np.full(scenario.tasks, scenario.candidate_resolves)
    if scenario.dropped_task is not None:
        rates[0] = scenario.dropped_task
    return rates


@functools.cache
def rule_policy(rule: str):
    """The gate's default policy under ``rule``, built once (the policy every simulated decision is made on)."""
    return resolve_policy({"rule": rule})


def decision_of(rows: list[dict], rule: str, generation: int, look_alphas: dict[str, float] | None = None) -> dict:
    """The gate's decision (``evaluate_candidate``) on simulated rows of the bench's pair, under the rule's default
    policy (``look_alphas``: the levels to decide at instead of the generation's share)."""
    keywords: dict = {"generation": generation} if GENERATIONS_AWARE else {}
    if look_alphas is not None:
        keywords["look_alphas"] = look_alphas
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm=INCUMBENT,
        candidate_arm=CANDIDATE,
        model="simulated-model",
        policy=rule_policy(rule),
        rows=rows,
        **keywords,
    )


def decide(rows: list[dict], rule: str, generation: int) -> str:
    return decision_of(rows, rule, generation)["decision"]


def run_row(job: tuple[str, str, int, int]) -> dict[str, int]:
    """Promotions (any generation of the experiment) over ``trials`` seeded experiments of one scenario and rule."""
    name, rule, trials, seed = job
    scenario = next(s for s in scenarios() if s.name == name)
    rng = np.random.default_rng(seed)
    promoted = 0
    for _ in range(trials):
        base, effects = draw_suite(rng, scenario)
        rates = np.full(scenario.tasks, scenario.incumbent_resolves)
        incumbent = _arm_rows(INCUMBENT, *draw_arm(rng, scenario, base, np.zeros(scenario.tasks), rates))
        for generation in range(scenario.generations):
            # Every generation's candidate is fresh; the incumbent's cells are cached and shared by all of them.
            candidate = _arm_rows(CANDIDATE, *draw_arm(rng, scenario, base, effects, candidate_rates(scenario)))
            index = generation if scenario.generations > 1 else scenario.generation
            if decide(incumbent + candidate, rule, index) == "promote":
                promoted += 1
                break
    return {"promoted": promoted, "sessions": 2 * scenario.tasks * scenario.runs * scenario.generations}


def rate_text(count: int, trials: int) -> str:
    rate = count / trials
    return f"{100 * rate:.1f} ± {100 * math.sqrt(rate * (1 - rate) / trials):.1f}"


def met(scenario: Scenario, count: int, trials: int) -> bool | None:
    """The goal with the Monte-Carlo error's allowance (two standard errors); None without a goal."""
    rate = count / trials
    error = 2 * math.sqrt(max(rate * (1 - rate), 1e-4) / trials)
    if scenario.goal_max is not None:
        return rate <= scenario.goal_max + error
    if scenario.goal_min is not None:
        return rate >= scenario.goal_min - error
    return None


RULES = ("noise_aware", "upstream")


def table(
    results: dict[tuple[str, str], dict[str, int]], trials: int, before: dict | None = None
) -> tuple[str, list[str]]:
    """The rules table; ``before``: an earlier run's counts (main's gate, ``--before``) for a column beside."""
    header = ["row", "scenario", "truth", "design", "sessions", "noise_aware", "upstream", "goal (noise_aware)"]
    if before:
        header.insert(5, "noise_aware, before")
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    missed = []
    for scenario in scenarios():
        counts = {rule: results[(scenario.name, rule)] for rule in RULES}
        verdict = met(scenario, counts["noise_aware"]["promoted"], trials)
        if verdict is False:
            missed.append(scenario.name)
        goal = scenario.goal if verdict is None else f"{scenario.goal} {'met' if verdict else 'MISSED'}"
        design = f"{scenario.tasks} × {scenario.runs}" + (f" ({scenario.design_note})" if scenario.design_note else "")
        cells = [
            scenario.name,
            scenario.title,
            scenario.truth,
            design,
            str(counts["noise_aware"]["sessions"]),
            rate_text(counts["noise_aware"]["promoted"], trials),
            rate_text(counts["upstream"]["promoted"], trials),
            goal,
        ]
        if before:
            old = before.get(f"{scenario.name}/noise_aware")
            cells.insert(5, rate_text(old["promoted"], trials) if old else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), missed


def write_docs(path: Path, body: str, start: str = START, end: str = END) -> None:
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise SystemExit(f"{path}: markers {start} … {end} not found; add them where the table belongs")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{body}\n{end}{tail}", encoding="utf-8")


def _pool_map(function: Callable, jobs: list, workers: int) -> list:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, jobs))


def run_named_rows(
    function: Callable, names: list[str], trials: int, seeds: tuple[int, int], workers: int
) -> dict[str, dict]:
    """Row name → the counts ``function`` returns for ``(name, trials, seed)``; row i's seed is seeds[0] + (i + 1) ×
    seeds[1], so every row has its own draws and adding a row leaves the earlier rows' draws alone."""
    jobs = [(name, trials, seeds[0] + seeds[1] * (index + 1)) for index, name in enumerate(names)]
    return dict(zip(names, _pool_map(function, jobs, workers), strict=True))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, ["---"] * len(header), *rows])


def goal_cell(
    name: str, goal: str, bounds: tuple[float | None, float | None], count: int, trials: int, missed: list[str]
) -> str:
    """The goal's text with met / MISSED (``bounds``: the most and the least rate it allows); a missed goal's row
    name is added to ``missed``."""
    verdict = met(Scenario(name, "", "", 1, 1, goal_max=bounds[0], goal_min=bounds[1]), count, trials)
    if verdict is False:
        missed.append(name)
    return goal if verdict is None else f"{goal} {'met' if verdict else 'MISSED'}"


def finish_part(args: argparse.Namespace, body: str, started: float, markers: tuple[str, str]) -> int:
    """Print a part's table and its runtime, write it between its markers unless --no-docs; the seconds it took."""
    print(body)
    elapsed = time.monotonic() - started
    print(f"\n({elapsed:.0f} s on {args.workers} worker(s))", file=sys.stderr)
    if not args.no_docs:
        write_docs(args.docs, body, *markers)
    return round(elapsed)


def rules_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The rules table; returns the rows whose goal the default missed and the raw counts."""
    names = [s.name for s in scenarios()]
    jobs = [(name, rule, args.trials, args.seed + 1000 * i) for i, name in enumerate(names) for rule in RULES]
    started = time.monotonic()
    counts = _pool_map(run_row, jobs, args.workers)
    results = {(job[0], job[1]): count for job, count in zip(jobs, counts, strict=True)}
    before = json.loads(args.before.read_text()).get("rules") if args.before else None
    body_table, missed = table(results, args.trials, before)
    generations = (
        f"generation {POWER_GENERATION} of a two-generation experiment for the P rows (alpha/4), generation 0 "
        "(alpha/2) for the others"
        if GENERATIONS_AWARE
        else "every generation at the policy's alpha (this gate does not spend alpha over generations)"
    )
    body = "\n".join(
        [
            f"Promotion rate in percent ± its Monte-Carlo standard error; {args.trials} simulated experiments per row, "
            f"seed {args.seed}; both rules see the same draws. Task log-cost levels uniform over ±{BASELINE_SPREAD:g} "
            f"(D1: one task 10× the others); run noise lognormal σ = {SIGMA:g} unless the row says otherwise; "
            f"{generations}. Sessions: paid sessions per decision (both arms; N9: all five generations). "
            "A goal is met within two Monte-Carlo standard errors.",
            "",
            body_table,
        ]
    )
    print(body)
    print(f"\n({time.monotonic() - started:.0f} s on {args.workers} worker(s))", file=sys.stderr)
    if not args.no_docs:
        write_docs(args.docs, body)
        print(f"wrote the table into {args.docs}", file=sys.stderr)
    return missed, {f"{name}/{rule}": count for (name, rule), count in results.items()}


# ─── Fixed against sequential designs ───────────────────────────────────────


def sequential_scenarios() -> tuple[Scenario, ...]:
    rows = {s.name: s for s in scenarios()}
    return tuple(rows[name] for name in ("N1", "N3", "P1", "Q1", "Q2")) + (
        Scenario("C1", "costlier", "10 % dearer, all resolve", rows["P1"].tasks, rows["P1"].runs, -0.10),
    )


def run_sequential_row(job: tuple[str, int, int, float]) -> dict[str, int]:
    """The fixed design (the scenario's runs) and the sequential design on the same draws: promotions and sessions."""
    name, trials, seed, futility = job
    scenario = next(s for s in sequential_scenarios() if s.name == name)
    design = run_design({**SEQUENTIAL_RUNS, "futility_power": futility})
    drawn = Scenario(**{**scenario.__dict__, "runs": max(design["max"], scenario.runs)})
    rng = np.random.default_rng(seed)
    keywords = {"generation": scenario.generation} if GENERATIONS_AWARE else {}
    counts = {"fixed_promoted": 0, "fixed_sessions": 0, "sequential_promoted": 0, "sequential_sessions": 0}
    for _ in range(trials):
        base, effects = draw_suite(rng, drawn)
        rates = np.full(drawn.tasks, drawn.incumbent_resolves)
        incumbent = _arm_rows(INCUMBENT, *draw_arm(rng, drawn, base, np.zeros(drawn.tasks), rates))
        rows = incumbent + _arm_rows(CANDIDATE, *draw_arm(rng, drawn, base, effects, candidate_rates(drawn)))
        fixed_rows = [row for row in rows if row["run"] < scenario.runs]
        counts["fixed_promoted"] += decide(fixed_rows, "noise_aware", scenario.generation) == "promote"
        counts["fixed_sessions"] += 2 * scenario.tasks * scenario.runs
        sequential = sequential_decision(
            [row for row in rows if row["run"] < design["max"]],
            incumbent_arm=INCUMBENT,
            candidate_arm=CANDIDATE,
            model="simulated-model",
            policy=rule_policy("noise_aware"),
            design=design,
            **keywords,
        )
        counts["sequential_promoted"] += sequential["decision"] == "promote"
        counts["sequential_sessions"] += 2 * scenario.tasks * sequential["looks"][-1]["runs"]
    return counts


def sequential_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """Fixed vs sequential on the same draws, at each futility level asked for; the first level is the table's."""
    trials, rows = args.sequential_trials, sequential_scenarios()
    header = ["row", "scenario", "design", "fixed · promoted", "fixed · sessions"]
    levels = args.futility
    for level in levels:
        header += [f"sequential (futility {level:g}) · promoted", "· sessions"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    jobs = [(s.name, trials, args.seed + 7919 * (i + 1), level) for i, s in enumerate(rows) for level in levels]
    started = time.monotonic()
    counts = dict(
        zip([(job[0], job[3]) for job in jobs], _pool_map(run_sequential_row, jobs, args.workers), strict=True)
    )
    for scenario in rows:
        first = counts[(scenario.name, levels[0])]
        cells = [
            scenario.name,
            f"{scenario.title}: {scenario.truth}",
            f"{scenario.tasks} × {scenario.runs}",
            rate_text(first["fixed_promoted"], trials),
            f"{first['fixed_sessions'] / trials:.0f}",
        ]
        for level in levels:
            count = counts[(scenario.name, level)]
            cells += [rate_text(count["sequential_promoted"], trials), f"{count['sequential_sessions'] / trials:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    body = "\n".join(
        [
            f"The fixed design (each row's runs) against the sequential design `runs: {{min: {SEQUENTIAL_RUNS['min']}, "
            f"max: {SEQUENTIAL_RUNS['max']}, step: {SEQUENTIAL_RUNS['step']}}}` (pocock spending) on the same draws; "
            f"noise_aware rule; {trials} simulated decisions per row, seed {args.seed}. Promotion rate in percent ± "
            "its Monte-Carlo standard error; sessions = paid sessions per decision, both arms of the pair.",
            "",
            "\n".join(lines),
        ]
    )
    print(body)
    print(f"\n({time.monotonic() - started:.0f} s on {args.workers} worker(s))", file=sys.stderr)
    if not args.no_docs:
        write_docs(args.docs, body, SEQ_START, SEQ_END)
    return [], {f"{name}/futility {level:g}": count for (name, level), count in counts.items()}


# ─── Several agents: one candidate, a pair per agent CLI ────────────────────

AGENT_START, AGENT_END = "<!-- agents:start -->", "<!-- agents:end -->"
AGENT_NAMES = ("claude-code", "opencode", "copilot")
AGENT_OFFSET_SD = 0.3  # each agent's own per-task cost level around the suite's (the CLIs differ per task)


@dataclass(frozen=True)
class AgentScenario:
    name: str
    truth: str
    savings: tuple[float, ...]  # per agent: its true saving on every task (negative: dearer)
    tasks: int
    runs: int
    goals: dict = field(default_factory=dict)  # across_agents rule → (goal text, max rate or None, min rate or None)


def agent_scenarios() -> tuple[AgentScenario, ...]:
    k_power, n_power = recommended_design(15.0, tasks=None, shared_sd=0.0, generation=0)
    null = ("≤ 5 %", 0.05, None)
    return (
        AgentScenario("A1", "null: every agent identical", (0.0, 0.0, 0.0), 12, 3, {"all": null, "any": null}),
        AgentScenario(
            "A2", "two agents 15 % cheaper, one 15 % dearer", (0.15, 0.15, -0.15), 12, 3, {"all": null, "any": null}
        ),
        # The intersection-union test's least favourable case: two agents surely promote, so all's rate is the third
        # (identical) pair's false-promotion rate alone, which its own test keeps at most alpha.
        AgentScenario("A3", "two agents 30 % cheaper, one identical", (0.3, 0.3, 0.0), k_power, n_power, {"all": null}),
        AgentScenario("A4", "one agent 15 % cheaper, two identical", (0.15, 0.0, 0.0), 12, 3, {"all": null}),
        AgentScenario("A5", "one agent 15 % cheaper, two identical", (0.15, 0.0, 0.0), k_power, n_power, {"all": null}),
        AgentScenario("A6", "every agent 15 % cheaper", (0.15, 0.15, 0.15), k_power, n_power),
        # any's no-worse guard on spend: one agent dearer by the spend margin (10 %) or more must not slip through.
        AgentScenario(
            "A7", "two agents 30 % cheaper, one 10 % dearer", (0.3, 0.3, -0.10), k_power, n_power, {"any": null}
        ),
        AgentScenario(
            "A8", "two agents 30 % cheaper, one 15 % dearer", (0.3, 0.3, -0.15), k_power, n_power, {"any": null}
        ),
    )


def run_agents_row(job: tuple[str, int, int]) -> dict[str, int]:
    """Promotions under across_agents all and any over ``trials`` seeded three-agent generations of one scenario,
    each agent's pair decided by the gate (``evaluate_candidate``) and combined by ``gate.across_agents``."""
    from skillbench.decision.gate import across_agents

    name, trials, seed = job
    scenario = next(s for s in agent_scenarios() if s.name == name)
    drawn = Scenario(name, "", "", scenario.tasks, scenario.runs)
    rng = np.random.default_rng(seed)
    policies = {rule: resolve_policy({"across_agents": rule}) for rule in ("all", "any")}
    counts = {"all": 0, "any": 0, "sessions": 0}
    ones = np.ones(scenario.tasks)
    for _ in range(trials):
        suite_base = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, scenario.tasks)
        decisions, rows = [], []
        for agent, saving in zip(AGENT_NAMES, scenario.savings, strict=True):
            base = suite_base + rng.normal(0.0, AGENT_OFFSET_SD, scenario.tasks)
            effects = np.full(scenario.tasks, math.log(1 - saving))
            incumbent = _arm_rows(INCUMBENT, *draw_arm(rng, drawn, base, np.zeros(scenario.tasks), ones))
            candidate = _arm_rows(CANDIDATE, *draw_arm(rng, drawn, base, effects, ones))
            pair = incumbent + candidate
            decisions.append(
                evaluate_candidate(
                    aggregate_by_task(pair),
                    incumbent_arm=INCUMBENT,
                    candidate_arm=CANDIDATE,
                    model="simulated-model",
                    policy=rule_policy("noise_aware"),
                    rows=pair,
                    generation=0,
                )
            )
            rows += [{**row, "agent": agent} for row in pair]
        for rule, policy in policies.items():
            # The pairs' own decisions do not depend on across_agents; only how they combine does.
            counts[rule] += across_agents(decisions, [], policy)["decision"] == "promote"
        counts["sessions"] += 2 * scenario.tasks * scenario.runs * len(AGENT_NAMES)
    return counts


def agents_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The three-agent table: how often one candidate is promoted across three agents under each rule."""
    trials, rows = args.agent_trials, agent_scenarios()
    started = time.monotonic()
    counts = run_named_rows(run_agents_row, [s.name for s in rows], trials, (args.seed, 104729), args.workers)
    header = ["row", "truth (per agent)", "design per agent", "sessions", "all", "any", "goal"]
    before = json.loads(args.before.read_text()).get("agents") if args.before else None
    if before:
        header[4:6] = ["all", "all, before", "any", "any, before"]
    lines = []
    missed: list[str] = []
    for scenario in rows:
        count = counts[scenario.name]
        goals = [
            f"{rule} {goal_cell(f'{scenario.name}/{rule}', text, (low, high), count[rule], trials, missed)}"
            for rule, (text, low, high) in scenario.goals.items()
        ]
        cells = [
            scenario.name,
            scenario.truth,
            f"{scenario.tasks} × {scenario.runs}",
            f"{count['sessions'] / trials:.0f}",
            rate_text(count["all"], trials),
            rate_text(count["any"], trials),
            "; ".join(goals) or "—",
        ]
        if before:
            old = before.get(scenario.name)
            cells[5:5] = [rate_text(old["all"], trials) if old else "—"]
            cells[7:7] = [rate_text(old["any"], trials) if old else "—"]
        lines.append(cells)
    body = "\n".join(
        [
            f"One candidate on three agents ({', '.join(AGENT_NAMES)}), a pair per agent, each decided by the "
            f"noise_aware rule at generation 0 (alpha/2) and combined by `gate.across_agents`; {trials} simulated "
            f"generations per row, seed {args.seed}; every agent's pair sees its own draws (task levels: the suite's "
            f"uniform ±{BASELINE_SPREAD:g} plus an agent offset sd {AGENT_OFFSET_SD:g}; run noise lognormal "
            f"σ = {SIGMA:g}; all runs resolve). Promotion rate in percent ± its Monte-Carlo standard error; "
            "sessions: paid sessions per decision, every agent's both arms. A goal is met within two Monte-Carlo "
            "standard errors.",
            "",
            markdown_table(header, lines),
        ]
    )
    finish_part(args, body, started, (AGENT_START, AGENT_END))
    return missed, counts


# ─── Review quality: review cases judged against hidden labels ─────────────

REVIEW_START, REVIEW_END = "<!-- review-quality:start -->", "<!-- review-quality:end -->"
REVIEW_INCUMBENT, REVIEW_CANDIDATE = "review", "candidate_review"
F1_SIGMA = 0.15  # run-to-run sd of a review's weighted F1 (clipped to 0..1)
F1_LEVELS = (0.55, 0.85)  # a defect case's incumbent weighted F1 is uniform over this range
REVIEW_COST_SHARED = 0.1  # sd of the log-cost effect a (case, arm)'s runs share


@dataclass(frozen=True)
class ReviewScenario:
    name: str
    truth: str
    defect_cases: int = 8
    clean_cases: int = 4
    runs: int = 5
    saving: float = 0.0  # true saving on every case (0.2 = 20 % cheaper)
    f1_effect: float = 0.0  # candidate's weighted-F1 shift on every defect case
    case_effect: float | None = None  # defect case 0's shift instead (the one case that regresses)
    f1_shared: float = 0.0  # sd of a weighted-F1 effect a (case, arm)'s runs share
    blocker: tuple[float, float] = (1.0, 1.0)  # chance a run finds the case's blocking defect (incumbent, candidate)
    lost_blocker: float | None = None  # defect case 0's candidate chance instead
    clean: tuple[float, float] = (1.0, 1.0)  # chance a run passes a clean control (incumbent, candidate)
    margin: float | None = None  # review_f1_margin (None: the default)
    f1_moment: float = 0.0  # sd of an F1 effect every case of one arm's batch shares (the moment it ran in)
    design: str = "cached"  # the F1 moment: each arm its own (cached incumbent) or one for both (anchor)
    goal: str = "—"
    goal_max: float | None = None
    goal_min: float | None = None


def review_scenarios() -> tuple[ReviewScenario, ...]:
    null = {"goal": "≤ 5 %", "goal_max": 0.05}
    one = {"goal": "≤ 10 %", "goal_max": 0.10}
    power = {"goal": "≥ 80 %", "goal_min": 0.80}
    cheaper = {"saving": 0.2}
    return (
        ReviewScenario("V1", "identical quality and cost", **null),
        ReviewScenario("V2", "identical; F1 effects a (case, arm)'s runs share, τ = 0.1", f1_shared=0.1, **null),
        ReviewScenario(
            "V3", "20 % cheaper, F1 0.10 lower everywhere (at the margin)", f1_effect=-0.10, **cheaper, **null
        ),
        ReviewScenario(
            "V4", "the same with shared F1 effects τ = 0.05", f1_effect=-0.10, f1_shared=0.05, **cheaper, **null
        ),
        ReviewScenario("V5", "20 % cheaper, F1 0.15 lower everywhere", f1_effect=-0.15, **cheaper, **null),
        ReviewScenario(
            "V6",
            "20 % cheaper; one case of 8 F1 −0.40, the others +0.03 (mean −0.02)",
            f1_effect=0.03,
            case_effect=-0.40,
            **cheaper,
            **one,
        ),
        ReviewScenario("V7", "20 % cheaper; one case's blocker found 100 % → 60 %", lost_blocker=0.6, **cheaper, **one),
        ReviewScenario("V8", "20 % cheaper; clean controls passed 100 % → 70 %", clean=(1.0, 0.7), **cheaper, **one),
        ReviewScenario("V9", "20 % cheaper, equal quality", defect_cases=16, **cheaper, **power),
        ReviewScenario(
            "V10",
            "20 % cheaper, equal quality; blockers found 90 %, clean controls passed 95 % (both arms)",
            runs=10,
            blocker=(0.9, 0.9),
            clean=(0.95, 0.95),
            **cheaper,
        ),
        ReviewScenario("V11", "equal cost, F1 0.15 higher everywhere", defect_cases=16, f1_effect=0.15, **power),
        ReviewScenario("V12", "equal cost, F1 0.10 higher everywhere", defect_cases=16, f1_effect=0.10),
        ReviewScenario("M1", "margin 0.05: 20 % cheaper, equal quality", defect_cases=16, margin=0.05, **cheaper),
        ReviewScenario("M2", "margin 0.15: 20 % cheaper, equal quality", defect_cases=16, margin=0.15, **cheaper),
        ReviewScenario(
            "M3", "margin 0.05: 20 % cheaper, F1 0.05 lower", f1_effect=-0.05, margin=0.05, **cheaper, **null
        ),
        ReviewScenario(
            "M4", "margin 0.15: 20 % cheaper, F1 0.15 lower", f1_effect=-0.15, margin=0.15, **cheaper, **null
        ),
        # At the margin with an F1 moment (sd 0.05) each arm's cells share: the old design (each arm its own moment:
        # the incumbent's cached cells ran at another time) and the anchor (both arms' cells in one moment).
        *(
            ReviewScenario(
                f"V{13 + index}",
                f"20 % cheaper, F1 0.10 lower (at the margin); F1 moment sd 0.05, {design} design",
                defect_cases=cases,
                f1_effect=-0.10,
                f1_moment=0.05,
                design=design,
                **cheaper,
                **(null if design == "anchor" else {}),
            )
            for index, (design, cases) in enumerate((("cached", 8), ("cached", 16), ("anchor", 8), ("anchor", 16)))
        ),
    )


def _review_metrics(case: str, f1: float, found: bool, passed: bool, fp: int) -> dict:
    defect = case == "defect"
    return {
        "case": case,
        "output_error": None,
        "verdict": "request_changes" if defect else ("approve" if passed else "comment"),
        "expected_verdict": "request_changes" if defect else "approve",
        "findings": (2 if defect else 0) + fp,
        "defects": 2 if defect else 0,
        "blocking_defects": 1 if defect else 0,
        "tp": 2 if defect else 0,
        "fp": fp,
        "fn": 0,
        "precision": f1,
        "recall": f1,
        "f1": f1,
        "weighted_precision": f1,
        "weighted_recall": f1,
        "weighted_f1": f1,
        "blocker_recall": 1.0 if found else 0.0,
        "verdict_correct": True if defect else passed,
        "clean_control_passed": None if defect else passed,
    }


def draw_review_rows(rng: np.random.Generator, scenario: ReviewScenario) -> list[dict]:
    """Both arms' rows of one simulated review suite: per case a cost level, per defect case an F1 level; each
    (case, arm) an effect its runs share; per run lognormal cost noise, F1 noise, blocker and clean-control draws."""
    cases = [("defect", k) for k in range(scenario.defect_cases)] + [("clean", k) for k in range(scenario.clean_cases)]
    levels = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, len(cases))
    f1_levels = rng.uniform(*F1_LEVELS, len(cases))
    moments = (0.0, 0.0)
    if scenario.f1_moment:
        drawn = rng.normal(0.0, scenario.f1_moment, 2)
        moments = (float(drawn[0]), float(drawn[0] if scenario.design == "anchor" else drawn[1]))
    rows = []
    for index, (case, k) in enumerate(cases):
        for side, arm in enumerate((REVIEW_INCUMBENT, REVIEW_CANDIDATE)):
            saving = scenario.saving if side else 0.0
            cost_shared = rng.normal(0.0, REVIEW_COST_SHARED)
            f1_shared = rng.normal(0.0, scenario.f1_shared) if scenario.f1_shared else 0.0
            shift = 0.0
            if side:
                shift = scenario.case_effect if scenario.case_effect is not None and k == 0 else scenario.f1_effect
            blocker = scenario.blocker[side]
            if side and scenario.lost_blocker is not None and k == 0:
                blocker = scenario.lost_blocker
            for run in range(scenario.runs):
                cost = math.exp(levels[index] + math.log(1 - saving) + cost_shared + rng.normal(0.0, SIGMA))
                if case == "defect":
                    f1 = float(
                        np.clip(
                            f1_levels[index] + shift + f1_shared + moments[side] + rng.normal(0.0, F1_SIGMA), 0.0, 1.0
                        )
                    )
                    found, passed, fp = bool(rng.random() < blocker), True, int(rng.poisson(0.5))
                    resolved = found
                else:
                    passed = bool(rng.random() < scenario.clean[side])
                    f1, found, fp = 1.0, True, 0 if passed else 1 + int(rng.poisson(0.5))
                    resolved = passed
                rows.append(
                    {
                        "task": f"{case[0]}{k:02d}",
                        "class": f"review-{case}",
                        "arm": arm,
                        "run": run,
                        "resolved": resolved,
                        "error_kind": None if resolved else "review-incorrect",
                        "cost_usd": cost,
                        "sandbox_backend": "bwrap",
                        "review": _review_metrics(case, round(f1, 4), found, passed, fp),
                    }
                )
    return rows


def point_rule_blocks(decision: dict) -> bool:
    """Whether the point rules would keep the incumbent: a defect case's mean blocker recall fell, or a clean
    control the candidate passed in fewer runs (each blocks whenever its tested counterpart does, and more)."""
    for case in decision["tests"]["review"]["cases"]:
        if case["case"] == "defect" and case["candidate_blocker_recall"] < case["incumbent_blocker_recall"]:
            return True
        if case["case"] == "clean" and case["candidate_successes"] < case["incumbent_successes"]:
            return True
    return False


def run_review_row(job: tuple[str, int, int]) -> dict[str, int]:
    """Promotions over ``trials`` seeded review suites of one scenario: the noise_aware rule (and the promotion's
    route), the point rules derived from its records, the Holm-adjusted case checks, and the upstream rule."""
    from skillbench.decision import review

    name, trials, seed = job
    scenario = next(s for s in review_scenarios() if s.name == name)
    rng = np.random.default_rng(seed)
    extra = {} if scenario.margin is None else {"review_f1_margin": scenario.margin}
    policies = {rule: resolve_policy({"rule": rule, **extra}) for rule in RULES}
    counts = {"noise_aware": 0, "point": 0, "holm": 0, "upstream": 0, "cost": 0, "review_quality": 0, "resolution": 0}
    for _ in range(trials):
        rows = draw_review_rows(rng, scenario)
        by_task = aggregate_by_task(rows)

        def decide(rule: str, by_task: dict = by_task, rows: list = rows) -> dict:
            return evaluate_candidate(
                by_task,
                incumbent_arm=REVIEW_INCUMBENT,
                candidate_arm=REVIEW_CANDIDATE,
                model="simulated-model",
                policy=policies[rule],
                rows=rows,
                generation=0,
            )

        decision = decide("noise_aware")
        if decision["decision"] == "promote":
            counts["noise_aware"] += 1
            counts[decision["tests"]["review"]["route"]] += 1
            counts["point"] += not point_rule_blocks(decision)
        review.CASE_ADJUSTMENT = "holm"
        try:
            counts["holm"] += decide("noise_aware")["decision"] == "promote"
        finally:
            review.CASE_ADJUSTMENT = "none"
        counts["upstream"] += decide("upstream")["decision"] == "promote"
    return counts


def review_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The review rule's false-promotion rate and power, both rules and the point-rule variant on the same draws."""
    trials, rows = args.review_trials, review_scenarios()
    started = time.monotonic()
    counts = run_named_rows(run_review_row, [s.name for s in rows], trials, (args.seed, 15485863), args.workers)
    header = [
        "row",
        "truth",
        "design",
        "sessions",
        "noise_aware",
        "routes (cost / review / resolution)",
        "point rules",
        "Holm over cases",
        "upstream",
        "goal (noise_aware)",
    ]
    lines = []
    missed: list[str] = []
    for scenario in rows:
        count = counts[scenario.name]
        cases = f"{scenario.defect_cases} + {scenario.clean_cases}"
        cells = [
            scenario.name,
            scenario.truth,
            f"({cases}) × {scenario.runs}",
            str(2 * (scenario.defect_cases + scenario.clean_cases) * scenario.runs),
            rate_text(count["noise_aware"], trials),
            f"{count['cost']} / {count['review_quality']} / {count['resolution']}",
            rate_text(count["point"], trials),
            rate_text(count["holm"], trials),
            rate_text(count["upstream"], trials),
            goal_cell(
                scenario.name,
                scenario.goal,
                (scenario.goal_max, scenario.goal_min),
                count["noise_aware"],
                trials,
                missed,
            ),
        ]
        lines.append(cells)
    body = "\n".join(
        [
            f"Review suites of defect cases + clean controls × runs per arm, decided at generation 0 (alpha/2) by "
            f"`gate.evaluate_candidate`; {trials} simulated experiments per row, seed {args.seed}; every column sees "
            f"the same draws. Per case a log-cost level uniform over ±{BASELINE_SPREAD:g}, run noise lognormal "
            f"σ = {SIGMA:g}, a cost effect a (case, arm)'s runs share (τ = {REVIEW_COST_SHARED:g}); per defect case "
            f"an incumbent weighted F1 uniform over {F1_LEVELS[0]:g}–{F1_LEVELS[1]:g}, run noise sd {F1_SIGMA:g} "
            "(clipped to 0..1), one blocking defect found or missed per run; a clean control passed or failed per "
            f"run (a failure has 1 + Poisson(0.5) false positives). Margin {resolve_policy(None).review_f1_margin:g} "
            "unless the row says otherwise. Promotion rate in percent ± its Monte-Carlo standard error; routes: "
            "the noise_aware promotions per route (counts); point rules: the noise_aware rule with point rules for "
            "blockers and clean controls (a case's mean blocker recall fell, a control passed in fewer runs) instead "
            "of the tests; Holm over cases: with those tests Holm-adjusted over the cases instead of each at alpha. "
            "A goal is met within two Monte-Carlo standard errors.",
            "",
            markdown_table(header, lines),
        ]
    )
    return missed, {**counts, "seconds": finish_part(args, body, started, (REVIEW_START, REVIEW_END))}


# ─── Skill triggering: recall and restraint per skill on labelled prompts ──

TRIGGER_START, TRIGGER_END = "<!-- trigger-quality:start -->", "<!-- trigger-quality:end -->"
TRIGGER_INCUMBENT, TRIGGER_CANDIDATE = "trigger", "candidate_trigger"
TRIGGER_SKILLS = ("change-plan", "change-work", "code-review", "release-notes")
NEAR_MISSES = 1  # per skill: prompts that resemble its job but expect no skill
NONE_PROMPTS = 2  # prompts that expect no skill and resemble none
RECALL_LEVELS = (0.80, 0.98)  # a labelled prompt's true chance of invoking its skill (incumbent), uniform
NEAR_MISS_LEVELS = (0.05, 0.25)  # a near miss's true chance of invoking the skill it resembles, uniform
BACKGROUND_LEVELS = (0.0, 0.03)  # any other (prompt, skill): the chance of a stray invocation, uniform
TRIGGER_CELL_SD = 0.3  # logit effect a (prompt, arm) cell's runs share
TRIGGER_MOMENT_SD = 0.2  # logit effect every cell of one arm shares: the moment it ran in (the incumbent's is cached)
TRIGGER_COST_SPREAD = 0.5  # prompt log-cost levels uniform on ±0.5
TRIGGER_COST_SHARED = 0.1  # sd of the log-cost effect a (prompt, arm)'s runs share
INVOKED_COST = 0.3  # an invoked skill's body adds 30 % to a short session's cost
TRIGGER_COLUMNS = (
    "row",
    "truth",
    "prompts (labelled + near misses + none) × runs",
    "sessions",
    "margin",
    "promoted",
    "trigger tests pass",
    "a test credibly worse / only not shown",
    "goal",
)


@dataclass(frozen=True)
class TriggerScenario:
    """A simulated trigger suite and candidate. Shifts are in probability (0.30 = 30 points) and apply to the
    first skill (``TRIGGER_SKILLS[0]``; generation g of a multi-generation row: skill g) unless the field says
    otherwise."""

    name: str
    truth: str
    prompts_per_skill: int = 3
    runs: int = 16
    saving: float = 0.15  # true saving per session before invocations (a shorter description)
    recall: float = 0.0  # shift of the skill's invocation chance on its labelled prompts
    others_recall: float = 0.0  # the same on every other skill's labelled prompts
    false_triggers: float = 0.0  # rise of the skill's invocation chance on every prompt not labelled for it
    near_misses: float = 0.0  # rise of the skill's invocation chance on its own near misses only
    shared: bool = True  # the cell and moment effects (False: independent runs, the tests' own assumption)
    generations: int = 1  # > 1: that many candidates against one cached incumbent (the experiment's rate)
    margin: float | None = None  # trigger_margin_pct (None: the default)
    design: str = "cached"  # cached: one incumbent (and its moment) for every generation; anchor: fresh beside each
    skills: int = len(TRIGGER_SKILLS)  # the suite's skills: the first this many of TRIGGER_SKILLS
    goal: str = "—"
    goal_max: float | None = None
    goal_min: float | None = None

    @property
    def prompts(self) -> int:
        return self.skills * (self.prompts_per_skill + NEAR_MISSES) + NONE_PROMPTS


def trigger_scenarios() -> tuple[TriggerScenario, ...]:
    """The trigger table's rows: power over prompts per skill × runs per prompt, then candidates within, at and
    beyond the margin, breaking ones, several generations and other margins."""
    alpha = {"goal": "≤ 2.5 %", "goal_max": 0.025}  # generation 0's alpha: the bound at the margin
    equal = "equal triggering, 15 % cheaper"
    grid = [
        TriggerScenario(f"P{per}×{runs}", equal, prompts_per_skill=per, runs=runs)
        for per in (3, 6)
        for runs in (4, 8, 16, 32)
    ]
    return (
        *grid,
        TriggerScenario("P3×32i", f"{equal}; independent runs", runs=32, shared=False),
        TriggerScenario(
            "W1", "recall −10 points on one skill (within the margin)", prompts_per_skill=6, runs=32, recall=-0.10
        ),
        TriggerScenario("B1", "recall −30 points on one skill", recall=-0.30, **alpha),
        TriggerScenario("B2", "recall −30 points on one skill", runs=32, recall=-0.30, **alpha),
        TriggerScenario("B3", "recall −50 points on one skill", runs=32, recall=-0.50, **alpha),
        TriggerScenario(
            "B4",
            "recall −30 points on one skill, +5 on the other three (mean −4)",
            runs=32,
            recall=-0.30,
            others_recall=0.05,
            **alpha,
        ),
        TriggerScenario("M1", "recall −20 points on one skill (at the margin)", runs=32, recall=-0.20, **alpha),
        TriggerScenario(
            "M1i",
            "recall −20 points on one skill (at the margin); independent runs",
            runs=32,
            recall=-0.20,
            shared=False,
            **alpha,
        ),
        TriggerScenario(
            "M2", "recall −20 points on one skill (at the margin)", prompts_per_skill=6, runs=32, recall=-0.20, **alpha
        ),
        TriggerScenario("M3", "recall −25 points on one skill (beyond the margin)", runs=32, recall=-0.25, **alpha),
        TriggerScenario(
            "M4",
            "one skill false-triggers +20 points on every prompt not its own (restraint at the margin)",
            runs=32,
            false_triggers=0.20,
            **alpha,
        ),
        TriggerScenario(
            "G1",
            "three generations, each recall −20 on another skill, one cached incumbent",
            runs=32,
            recall=-0.20,
            generations=3,
            goal="≤ 5 % per experiment",
            goal_max=0.05,
        ),
        TriggerScenario("N1", "one skill's near misses false-trigger +40 points", runs=32, near_misses=0.40),
        TriggerScenario("X1", f"margin 10: {equal}", prompts_per_skill=6, runs=32, margin=10.0),
        TriggerScenario(
            "X2",
            "margin 10: recall −10 points on one skill (at the margin)",
            prompts_per_skill=6,
            runs=32,
            recall=-0.10,
            margin=10.0,
            **alpha,
        ),
        TriggerScenario("X3", f"margin 30: {equal}", runs=16, margin=30.0),
        TriggerScenario(
            "X4",
            "margin 30: recall −30 points on one skill (at the margin)",
            runs=16,
            recall=-0.30,
            margin=30.0,
            **alpha,
        ),
        # Last, so the rows above keep their draws: the same three generations with independent runs, then the
        # trigger demo's design (tasks/trigger-demo: two skills, a handful of prompts each, a few runs per prompt).
        TriggerScenario(
            "G1i",
            "three generations as G1; independent runs",
            runs=32,
            recall=-0.20,
            generations=3,
            shared=False,
            goal="≤ 5 % per experiment",
            goal_max=0.05,
        ),
        *(
            TriggerScenario(f"D{per}×{runs}", f"{equal}; the demo's design", prompts_per_skill=per, runs=runs, skills=2)
            for per, runs in ((5, 6), (5, 8), (6, 8))
        ),
        TriggerScenario(
            "DM",
            "recall −20 points on one skill (at the margin); the demo's design",
            prompts_per_skill=5,
            runs=8,
            recall=-0.20,
            skills=2,
            **alpha,
        ),
        # The pipeline's design since the anchor: G1's three generations, each against fresh incumbent cells that ran
        # in its candidate's moment.
        TriggerScenario(
            "G1a",
            "three generations as G1; the anchor design (fresh incumbent cells beside each candidate's)",
            runs=32,
            recall=-0.20,
            generations=3,
            design="anchor",
            goal="≤ 5 % per experiment",
            goal_max=0.05,
        ),
    )


@dataclass(frozen=True)
class TriggerSuite:
    """One drawn suite: per prompt its label, whether it is a near miss and of which skill, each (prompt, skill)'s
    true invocation chance for the incumbent, and each prompt's log-cost level."""

    labels: tuple[str | None, ...]
    near_miss_of: tuple[int | None, ...]
    chances: np.ndarray  # (prompts, skills)
    cost_levels: np.ndarray  # (prompts,)


def draw_trigger_suite(
    rng: np.random.Generator, prompts_per_skill: int, skills: int = len(TRIGGER_SKILLS)
) -> TriggerSuite:
    """Labelled prompts per skill, its near misses, prompts for no skill. A prompt's chances are its own level,
    which both arms share (a prompt that is hard to recognise is hard for either description)."""
    layout: list[tuple[str | None, int | None, int | None, tuple[float, float]]] = []  # label, near miss, skill
    for index, skill in enumerate(TRIGGER_SKILLS[:skills]):
        layout += [(skill, None, index, RECALL_LEVELS)] * prompts_per_skill
        layout += [(None, index, index, NEAR_MISS_LEVELS)] * NEAR_MISSES
    layout += [(None, None, None, BACKGROUND_LEVELS)] * NONE_PROMPTS
    chances = rng.uniform(*BACKGROUND_LEVELS, (len(layout), skills))
    for prompt, (_, _, skill, levels) in enumerate(layout):
        if skill is not None:
            chances[prompt, skill] = rng.uniform(*levels)
    levels = rng.uniform(-TRIGGER_COST_SPREAD, TRIGGER_COST_SPREAD, len(layout))
    return TriggerSuite(tuple(p[0] for p in layout), tuple(p[1] for p in layout), chances, levels)


def candidate_chances(suite: TriggerSuite, scenario: TriggerScenario, skill: int) -> np.ndarray:
    """The candidate's true invocation chances: the incumbent's, shifted as the scenario says on ``skill``."""
    chances = suite.chances.copy()
    for prompt, label in enumerate(suite.labels):
        if label is not None:
            own = TRIGGER_SKILLS.index(label)
            chances[prompt, own] += scenario.recall if own == skill else scenario.others_recall
        if label != TRIGGER_SKILLS[skill]:
            chances[prompt, skill] += scenario.false_triggers
        if suite.near_miss_of[prompt] == skill:
            chances[prompt, skill] += scenario.near_misses
    return np.clip(chances, 0.001, 0.999)


def draw_trigger_arm(
    rng: np.random.Generator,
    suite: TriggerSuite,
    chances: np.ndarray,
    scenario: TriggerScenario,
    *,
    candidate: bool,
    moment: float | None = None,
) -> list[dict]:
    """One arm's rows: the arm's moment (drawn, or ``moment``: the batch's, which an anchor shares) and each cell's
    own effect on the logit scale, shared by the cell's runs, then an independent invocation draw per (run, skill);
    a session costs more for every skill it invoked."""
    prompts, runs = len(suite.labels), scenario.runs
    logits = np.log(chances / (1 - chances))
    if scenario.shared:
        arm_moment = rng.normal(0.0, TRIGGER_MOMENT_SD) if moment is None else moment
        logits = logits + arm_moment + rng.normal(0.0, TRIGGER_CELL_SD, (prompts, 1))
    invoked = rng.random((prompts, scenario.skills, runs)) < (1 / (1 + np.exp(-logits)))[:, :, None]
    saving = math.log(1 - scenario.saving) if candidate else 0.0
    log_costs = (
        suite.cost_levels[:, None]
        + saving
        + rng.normal(0.0, TRIGGER_COST_SHARED, (prompts, 1))
        + rng.normal(0.0, SIGMA, (prompts, runs))
    )
    arm = TRIGGER_CANDIDATE if candidate else TRIGGER_INCUMBENT
    rows = []
    for prompt, expected in enumerate(suite.labels):
        for run in range(runs):
            names = [name for k, name in enumerate(TRIGGER_SKILLS[: scenario.skills]) if invoked[prompt, k, run]]
            correct = names == ([expected] if expected else [])
            false = [name for name in names if name != expected]
            rows.append(
                {
                    "task": f"p{prompt:02d}",
                    "class": "trigger",
                    "arm": arm,
                    "run": run,
                    "resolved": correct,
                    "error_kind": None if correct else ("trigger-false" if false else "trigger-missed"),
                    "cost_usd": math.exp(log_costs[prompt, run]) * (1 + INVOKED_COST * len(names)),
                    "sandbox_backend": "bwrap",
                    "trigger": {
                        "expected": expected,
                        "near_miss": suite.near_miss_of[prompt] is not None,
                        "invoked": names,
                        "false_triggers": false,
                        "correct": correct,
                    },
                }
            )
    return rows


def trigger_conclusions(decision: dict) -> set[str]:
    """The conclusions of every skill's recall and restraint test in one decision."""
    return {
        by_test[test]["conclusion"]
        for by_test in decision["tests"]["triggers"].values()
        for test in ("recall", "restraint")
    }


def run_trigger_row(job: tuple[str, int, int]) -> dict[str, int]:
    """Over ``trials`` seeded suites of one scenario: experiments promoted (any generation) by the noise_aware rule,
    and per decision whether the trigger tests passed, or some test was credibly worse, or only not shown."""
    name, trials, seed = job
    scenario = next(s for s in trigger_scenarios() if s.name == name)
    rng = np.random.default_rng(seed)
    extra = {} if scenario.margin is None else {"trigger_margin_pct": scenario.margin}
    policy = resolve_policy({"rule": "noise_aware", **extra})
    counts = {"promoted": 0, "decisions": 0, "triggers_pass": 0, "worse": 0, "unshown": 0}
    for _ in range(trials):
        suite = draw_trigger_suite(rng, scenario.prompts_per_skill, scenario.skills)
        # Drawn once: every generation's candidate is compared with the same cached incumbent cells and their moment.
        incumbent = draw_trigger_arm(rng, suite, suite.chances, scenario, candidate=False)
        for generation in range(scenario.generations):
            chances = candidate_chances(suite, scenario, generation % scenario.skills)
            moment = None
            if scenario.design == "anchor":
                # Fresh incumbent cells beside the candidate's: one moment for both arms of the batch.
                moment = float(rng.normal(0.0, TRIGGER_MOMENT_SD))
                incumbent = draw_trigger_arm(rng, suite, suite.chances, scenario, candidate=False, moment=moment)
            rows = incumbent + draw_trigger_arm(rng, suite, chances, scenario, candidate=True, moment=moment)
            decision = evaluate_candidate(
                aggregate_by_task(rows),
                incumbent_arm=TRIGGER_INCUMBENT,
                candidate_arm=TRIGGER_CANDIDATE,
                model="simulated-model",
                policy=policy,
                rows=rows,
                generation=generation,
            )
            conclusions = trigger_conclusions(decision)
            counts["decisions"] += 1
            counts["worse"] += "worse" in conclusions
            counts["unshown"] += "inconclusive" in conclusions and "worse" not in conclusions
            counts["triggers_pass"] += not conclusions & {"worse", "inconclusive"}
            if decision["decision"] == "promote":
                counts["promoted"] += 1
                break
    return counts


def trigger_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The trigger rule's false-promotion rate and power on simulated trigger suites."""
    trials, rows = args.trigger_trials, trigger_scenarios()
    started = time.monotonic()
    counts = run_named_rows(run_trigger_row, [s.name for s in rows], trials, (args.seed, 32452843), args.workers)
    lines = []
    missed: list[str] = []
    default_margin = resolve_policy(None).trigger_margin_pct
    for scenario in rows:
        count = counts[scenario.name]
        labelled = scenario.skills * scenario.prompts_per_skill
        decisions = count["decisions"]
        cells = [
            scenario.name,
            scenario.truth,
            f"({labelled} + {scenario.skills * NEAR_MISSES} + {NONE_PROMPTS}) × {scenario.runs}",
            str(2 * scenario.prompts * scenario.runs * scenario.generations),
            f"{scenario.margin if scenario.margin is not None else default_margin:g}",
            rate_text(count["promoted"], trials),
            rate_text(count["triggers_pass"], decisions),
            f"{100 * count['worse'] / decisions:.1f} / {100 * count['unshown'] / decisions:.1f}",
            goal_cell(
                scenario.name, scenario.goal, (scenario.goal_max, scenario.goal_min), count["promoted"], trials, missed
            ),
        ]
        lines.append(cells)
    body = "\n".join(
        [
            f"Trigger suites of {len(TRIGGER_SKILLS)} skills, decided at generation 0 (alpha/2; G1: generations "
            f"0–2) by `gate.evaluate_candidate` under the noise_aware rule; {trials} simulated experiments per row, "
            f"seed {args.seed}. Per skill its labelled prompts (true chance of invoking it uniform over "
            f"{RECALL_LEVELS[0]:g}–{RECALL_LEVELS[1]:g}), {NEAR_MISSES} near miss ({NEAR_MISS_LEVELS[0]:g}–"
            f"{NEAR_MISS_LEVELS[1]:g}), and {NONE_PROMPTS} prompts for no skill; any other (prompt, skill) a stray "
            f"invocation {BACKGROUND_LEVELS[0]:g}–{BACKGROUND_LEVELS[1]:g}; the prompt's chances are shared by both "
            f"arms, the candidate's shifted by the row's points. On the logit scale every cell's runs share an "
            f"effect (sd {TRIGGER_CELL_SD:g}) and every cell of an arm the moment it ran in (sd "
            f"{TRIGGER_MOMENT_SD:g}; the incumbent's cells are cached, one moment for every generation) — rows marked "
            f"i: independent runs. Cost: a prompt log-cost level uniform over ±{TRIGGER_COST_SPREAD:g}, lognormal "
            f"run noise σ = {SIGMA:g}, a (prompt, arm) effect τ = {TRIGGER_COST_SHARED:g}, +{100 * INVOKED_COST:g} % "
            "per invoked skill, the candidate 15 % cheaper per session. Promoted: experiments promoted, in percent ± "
            "its Monte-Carlo standard error; trigger tests pass: decisions in which every skill's recall and "
            "restraint test showed the candidate within the margin; then the decisions in which some test was "
            "credibly worse, and those in which none was but some could not show the margin. A goal is met within "
            "two Monte-Carlo standard errors.",
            "",
            markdown_table(list(TRIGGER_COLUMNS), lines),
        ]
    )
    return missed, {**counts, "seconds": finish_part(args, body, started, (TRIGGER_START, TRIGGER_END))}


# ─── Noise every cell of an arm shares, runaways, caps, a noisy dominant task ─

NOISE_START, NOISE_END = "<!-- noise:start -->", "<!-- noise:end -->"
RUNAWAY_FACTORS = (5.0, 10.0)  # a runaway session costs this many times its task's usual, uniformly
SESSION_CAP_USD = 6.0  # budget.max_session_usd in the capped rows: six times the median task's usual session
DESIGNS = {
    "cached": "old design: the incumbent's cells are cached (one moment for every generation and look), the "
    "candidate's run fresh in each",
    "anchor": "anchor design: fresh incumbent cells beside the candidate's in every generation and look (one "
    "moment per batch, shared by both arms)",
}


@dataclass(frozen=True)
class NoiseScenario:
    """A simulated experiment whose noise is more than per-cell: an arm moment (``moment``: the sd of a log-cost
    effect every cell of one batch shares), runaway sessions, a spend cap, a noisy dominant task."""

    name: str
    truth: str
    tasks: int
    runs: int  # per cell; a sequential row's max
    designs: tuple[str, ...] = ("anchor",)
    moment: float = 0.0
    generations: int = 1
    sequential: bool = False
    saving: float = 0.0  # on every usual (not runaway) session
    runaways: tuple[float, float] = (0.0, 0.0)  # share of sessions that run away (incumbent, candidate)
    cap: float | None = None  # the session cap in USD: a session past it stops there, session-cap-reached
    capped_resolves: bool = False  # a capped session left work that passes verify and the oracle
    dominant: float | None = None  # task 0 costs this many times the others (the others at level 0)
    dominant_sigma: float = SIGMA  # task 0's run noise
    dominant_effect: float | None = None  # task 0's candidate change (the others then keep the total equal)
    ks: bool = False  # collect generation 0's cost p-values for the Kolmogorov-Smirnov check
    goal: str = "—"
    goal_max: float | None = None


def noise_scenarios() -> tuple[NoiseScenario, ...]:
    """The noise table's rows: arm moments under both designs (six generations; fixed and sequential), then the
    noises the anchor cannot remove (runaways, caps, a noisy dominant task), each at generation 0."""
    moments = []
    for eta in (0.05, 0.1, 0.2):
        for tasks, runs in ((12, 5), (34, 3)):
            moments.append(
                NoiseScenario(
                    f"E{len(moments) + 1}",
                    f"identical; arm moment η = {eta:g}; six generations",
                    tasks,
                    runs,
                    designs=("cached", "anchor"),
                    moment=eta,
                    generations=6,
                    goal="≤ 5 % per experiment, ≤ α per generation (anchor)",
                    goal_max=0.05,
                )
            )
    sequential = [
        NoiseScenario(
            f"S{index + 1}",
            f"identical; arm moment η = {eta:g}; six generations, sequential looks",
            12,
            SEQUENTIAL_RUNS["max"],
            designs=("cached", "anchor"),
            moment=eta,
            generations=6,
            sequential=True,
            goal="≤ 5 % per experiment, ≤ α per generation (anchor)",
            goal_max=0.05,
        )
        for index, eta in enumerate((0.05, 0.1, 0.2))
    ]
    alpha0 = {"goal": "≤ α (2.5 %), p uniform", "goal_max": 0.025, "ks": True}
    return (
        *moments,
        *sequential,
        NoiseScenario("R1", "identical; 5 % of sessions run away (5–10×)", 12, 5, runaways=(0.05, 0.05), **alpha0),
        NoiseScenario("R2", "identical; 5 % of sessions run away (5–10×)", 34, 3, runaways=(0.05, 0.05), **alpha0),
        NoiseScenario(
            "R3",
            "identical; one task 30× the others and noisier (σ 0.8), 5 % runaways also there",
            12,
            5,
            runaways=(0.05, 0.05),
            dominant=30.0,
            dominant_sigma=0.8,
            **alpha0,
        ),
        NoiseScenario(
            "D2",
            "identical; one task 30× the others and noisier (σ 0.8 against 0.3)",
            12,
            5,
            dominant=30.0,
            dominant_sigma=0.8,
            **alpha0,
        ),
        NoiseScenario(
            "D3",
            "equal total spend: the 30× task (σ 0.8) +10 %, the other eleven −27.3 %",
            12,
            5,
            dominant=30.0,
            dominant_sigma=0.8,
            dominant_effect=0.10,
            goal="≤ α (2.5 %)",
            goal_max=0.025,
        ),
        NoiseScenario(
            "C1",
            f"15 % cheaper per usual session, runaways 10 % against 5 % (+5.9 % uncapped); capped at "
            f"${SESSION_CAP_USD:g}: +0.3 %; a capped session resolves",
            34,
            3,
            saving=0.15,
            runaways=(0.05, 0.10),
            cap=SESSION_CAP_USD,
            capped_resolves=True,
            goal="≤ α (2.5 %)",
            goal_max=0.025,
        ),
        NoiseScenario(
            "C2",
            "the same; a capped session resolves nothing (the row: session-cap-reached)",
            34,
            3,
            saving=0.15,
            runaways=(0.05, 0.10),
            cap=SESSION_CAP_USD,
            goal="≤ α (2.5 %)",
            goal_max=0.025,
        ),
        NoiseScenario(
            "C3",
            "power: 15 % cheaper, runaways 5 % in both arms, capped at "
            f"${SESSION_CAP_USD:g} (a capped session resolves nothing)",
            34,
            3,
            saving=0.15,
            runaways=(0.05, 0.05),
            cap=SESSION_CAP_USD,
        ),
    )


def _noise_levels(rng: np.random.Generator, scenario: NoiseScenario) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task log-cost levels, the candidate's per-task log effect and each task's run noise."""
    sigmas = np.full(scenario.tasks, SIGMA)
    effects = np.full(scenario.tasks, math.log(1 - scenario.saving))
    if scenario.dominant is None:
        return rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, scenario.tasks), effects, sigmas
    base = np.zeros(scenario.tasks)
    base[0] = math.log(scenario.dominant)
    sigmas[0] = scenario.dominant_sigma
    if scenario.dominant_effect is not None:
        # The others change so that the suite's total spend does not: a weak null, with the heavy task dearer.
        rest = scenario.tasks - 1
        others = (scenario.dominant + rest - scenario.dominant * (1 + scenario.dominant_effect)) / rest
        effects[:] = math.log(others)
        effects[0] = math.log(1 + scenario.dominant_effect)
    return base, effects, sigmas


def _noise_rows(
    rng: np.random.Generator,
    scenario: NoiseScenario,
    arm: str,
    levels: np.ndarray,
    sigmas: np.ndarray,
    moments: list[float],
    batch: str,
    runaway: float,
) -> list[dict]:
    """One arm's rows over its batches of runs (``moments``: one per run, the moment of the batch it ran in):
    lognormal runs at the task's level, a share that runs away, a cap that stops a session at its USD value."""
    runs = len(moments)
    log_costs = (
        levels[:, None] + np.asarray(moments)[None, :] + sigmas[:, None] * rng.normal(0.0, 1.0, (len(levels), runs))
    )
    costs = np.exp(log_costs)
    ran_away = rng.random(costs.shape) < runaway
    costs = np.where(ran_away, costs * rng.uniform(*RUNAWAY_FACTORS, costs.shape), costs)
    capped = costs > scenario.cap if scenario.cap is not None else np.zeros(costs.shape, dtype=bool)
    if scenario.cap is not None:
        costs = np.minimum(costs, scenario.cap)
    rows = []
    for task in range(len(levels)):
        for run in range(runs):
            stopped = bool(capped[task, run])
            resolved = scenario.capped_resolves or not stopped
            rows.append(
                {
                    "task": f"t{task:02d}",
                    "class": "simulated",
                    "arm": arm,
                    "run": run,
                    "resolved": resolved,
                    "error_kind": "session-cap-reached" if stopped and not resolved else None,
                    "cost_usd": float(costs[task, run]),
                    "sandbox_backend": "bwrap",
                    "batch": f"{batch}/b{_batch_of(scenario, run)}",
                }
            )
    return rows


def _batch_of(scenario: NoiseScenario, run: int) -> int:
    """The batch a run belongs to: 0 for a fixed design; a sequential design's first look is ``min`` runs, then one
    batch per ``step``."""
    if not scenario.sequential:
        return 0
    return max(0, (run - SEQUENTIAL_RUNS["min"]) // SEQUENTIAL_RUNS["step"] + 1)


def _batch_moments(rng: np.random.Generator, scenario: NoiseScenario) -> list[float]:
    """One moment per batch, repeated over the batch's runs."""
    batches = [_batch_of(scenario, run) for run in range(scenario.runs)]
    drawn = rng.normal(0.0, scenario.moment, max(batches) + 1) if scenario.moment else np.zeros(max(batches) + 1)
    return [float(drawn[batch]) for batch in batches]


def _noise_decision(rows: list[dict], scenario: NoiseScenario, generation: int) -> dict:
    keywords = {"generation": generation} if GENERATIONS_AWARE else {}
    if scenario.sequential:
        return sequential_decision(
            rows,
            incumbent_arm=INCUMBENT,
            candidate_arm=CANDIDATE,
            model="simulated-model",
            policy=rule_policy("noise_aware"),
            design=run_design(dict(SEQUENTIAL_RUNS)),
            **keywords,
        )
    return decision_of(rows, "noise_aware", generation)


def _runs_taken(decision: dict, scenario: NoiseScenario) -> int:
    return decision["looks"][-1]["runs"] if scenario.sequential and decision.get("looks") else scenario.runs


def run_noise_row(job: tuple[str, int, int]) -> dict:
    """Per design: experiments promoted in any generation, promotions per generation, paid sessions, and (``ks``
    rows) generation 0's cost p-values, over ``trials`` seeded experiments of one scenario. Every generation is
    decided (a promotion does not stop the experiment here), so each generation's rate is its own; the designs
    see the same task levels, run noise and moments: only who shares which moment differs."""
    name, trials, seed = job
    scenario = next(s for s in noise_scenarios() if s.name == name)
    rng = np.random.default_rng(seed)
    counts: dict = {
        design: {"promoted": 0, "by_generation": [0] * scenario.generations, "sessions": 0, "p_values": []}
        for design in scenario.designs
    }
    for _ in range(trials):
        base, effects, sigmas = _noise_levels(rng, scenario)
        # The cached incumbent ran once, in its own moment; each generation's candidate batches in theirs.
        cached_moment = rng.normal(0.0, scenario.moment) if scenario.moment else 0.0
        cached = _noise_rows(
            rng, scenario, INCUMBENT, base, sigmas, [cached_moment] * scenario.runs, "sweep", scenario.runaways[0]
        )
        generations = []
        for generation in range(scenario.generations):
            moments = _batch_moments(rng, scenario)
            candidate = _noise_rows(
                rng, scenario, CANDIDATE, base + effects, sigmas, moments, f"gen{generation}", scenario.runaways[1]
            )
            anchor = _noise_rows(
                rng, scenario, INCUMBENT, base, sigmas, moments, f"gen{generation}", scenario.runaways[0]
            )
            generations.append((candidate, anchor))
        for design in scenario.designs:
            count = counts[design]
            promoted_any, furthest = False, 0
            for generation, (candidate, anchor) in enumerate(generations):
                incumbent = anchor if design == "anchor" else cached
                decision = _noise_decision(incumbent + candidate, scenario, generation)
                runs = _runs_taken(decision, scenario)
                furthest = max(furthest, runs)
                count["sessions"] += scenario.tasks * runs * (2 if design == "anchor" else 1)
                if scenario.ks and generation == 0:
                    count["p_values"].append(decision["tests"]["cost"]["p_value"])
                if decision["decision"] == "promote":
                    count["by_generation"][generation] += 1
                    promoted_any = True
            count["promoted"] += promoted_any
            if design == "cached":
                count["sessions"] += scenario.tasks * furthest  # the cached incumbent's cells, paid once
    return counts


def ks_text(p_values: list[float | None]) -> tuple[str, bool]:
    """The Kolmogorov-Smirnov check that null p-values are not too small (one-sided: the empirical distribution
    above the uniform's), and P(p ≤ 0.05); met when that test's p-value is at least 0.01."""
    from scipy import stats

    values = [1.0 if value is None else float(value) for value in p_values]
    test = stats.kstest(values, "uniform", alternative="greater")
    small = 100 * sum(value <= 0.05 for value in values) / len(values)
    return f"D⁺ {test.statistic:.3f} (p {test.pvalue:.2f}); P(p ≤ 0.05) {small:.1f} %", test.pvalue >= 0.01


def noise_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The noises a per-cell model leaves out, under the old (cached incumbent) and the anchor design."""
    trials, rows = args.noise_trials, noise_scenarios()
    if args.only:
        rows = tuple(scenario for scenario in rows if scenario.name in args.only)
    started = time.monotonic()
    # Row i of the full table draws from seed + (i + 1) × 49979687, so a quick look at a few rows sees their draws.
    index = {scenario.name: number for number, scenario in enumerate(noise_scenarios())}
    jobs = [(scenario.name, trials, args.seed + 49979687 * (index[scenario.name] + 1)) for scenario in rows]
    counts = dict(zip([job[0] for job in jobs], _pool_map(run_noise_row, jobs, args.workers), strict=True))
    before = json.loads(args.before.read_text())["noise"] if args.before else {}
    policy = resolve_policy(None)
    header = [
        "row",
        "truth",
        "design",
        "tasks × runs",
        "sessions per decision",
        "promoted, before",
        "promoted, after",
        "per generation, after (0 … 5)",
        "p-values, after",
        "goal (after)",
    ]
    lines, missed = [], []
    for scenario in rows:
        for design in scenario.designs:
            count = counts[scenario.name][design]
            cells_ok, goal = True, scenario.goal
            verdict = met(Scenario(scenario.name, "", "", 1, 1, goal_max=scenario.goal_max), count["promoted"], trials)
            per_generation = "—"
            if scenario.generations > 1:
                per_generation = " / ".join(f"{100 * value / trials:.1f}" for value in count["by_generation"])
                if design == "anchor":
                    for generation, value in enumerate(count["by_generation"]):
                        alpha = generation_alpha_of(policy, generation)
                        bound = Scenario("", "", "", 1, 1, goal_max=alpha)
                        cells_ok = cells_ok and bool(met(bound, value, trials))
            p_text = "—"
            if scenario.ks:
                p_text, uniform = ks_text(count["p_values"])
                cells_ok = cells_ok and uniform
            if design == "cached" or scenario.goal_max is None:
                goal_cell_text = "—"
            else:
                ok = bool(verdict) and cells_ok
                if not ok:
                    missed.append(f"{scenario.name}/{design}")
                goal_cell_text = f"{goal} {'met' if ok else 'MISSED'}"
            old = before.get(scenario.name, {}).get(design)
            lines.append(
                [
                    scenario.name,
                    scenario.truth,
                    design,
                    f"{scenario.tasks} × {'{2…6}' if scenario.sequential else scenario.runs}",
                    f"{count['sessions'] / trials / scenario.generations:.0f}",
                    rate_text(old["promoted"], trials) if old else "—",
                    rate_text(count["promoted"], trials),
                    per_generation,
                    p_text,
                    goal_cell_text,
                ]
            )
    body = "\n".join(
        [
            f"Identical (or, where the row says, no better) candidates decided by `gate.evaluate_candidate` "
            f"(S rows: `gate.sequential_decision`, runs {{min {SEQUENTIAL_RUNS['min']}, max {SEQUENTIAL_RUNS['max']}, "
            f"step {SEQUENTIAL_RUNS['step']}}}) under the default policy; {trials} simulated experiments per row, seed "
            f"{args.seed}. Task log-cost levels uniform over ±{BASELINE_SPREAD:g} (D and R3 rows: one task 30× "
            f"eleven at one level), lognormal run noise σ = {SIGMA:g}; an arm moment η is the sd of a log-cost effect "
            "every cell of one batch shares. Designs: "
            + "; ".join(f"**{key}**: {text}" for key, text in DESIGNS.items())
            + ". E and S rows decide all six generations of an experiment (generation g at α/2^(g+1)); the other "
            "rows one generation at α/2. Promoted: experiments promoted in any generation, in percent ± its "
            "Monte-Carlo standard error; before: main's gate on the same draws (its `--json` given with "
            "`--before`); per generation: each generation's own rate. Sessions per decision: both arms' paid "
            "sessions — the cached incumbent's counted once over the experiment's generations, the anchor's in "
            "every generation. p-values: generation 0's cost-test p-values against the uniform (one-sided "
            "Kolmogorov–Smirnov, p-values too small; met at p ≥ 0.01). A goal is met within two Monte-Carlo "
            "standard errors.",
            "",
            markdown_table(header, lines),
        ]
    )
    raw = {
        name: {design: {k: v for k, v in c.items() if k != "p_values"} for design, c in by.items()}
        for name, by in counts.items()
    }
    return missed, {**raw, "seconds": finish_part(args, body, started, (NOISE_START, NOISE_END))}


def generation_alpha_of(policy, generation: int) -> float:
    """Generation ``generation``'s alpha under the policy (an older gate without halving: the policy's alpha)."""
    try:
        from skillbench.decision.policy import generation_alpha
    except ImportError:
        return 0.05
    return generation_alpha(policy, generation)


# ─── Choosing the spend test: candidate tests on the same draws ─────────────

SPEND_START, SPEND_END = "<!-- spend-tests:start -->", "<!-- spend-tests:end -->"
SPEND_TESTS = {
    "t": "the old t: spread between tasks, s·√Σw², K − 1 df",
    "sandwich": "linearised (sandwich) variance of the ratio of totals, K/(K − 1)·Σ(a_i/A − b_i/B)², K − 1 df",
    "cr2": "CR2 cluster-robust variance of the weighted mean ratio, Bell–McCaffrey df",
    "t+flip": "the old t AND the studentized sign-flip test (same standard error)",
    "runs": "run-aware t: Σw²(u_i + τ²) (each task's run noise plus the spread beyond it), Welch–Satterthwaite df",
    "runs+flip": "the run-aware t AND the sign-flip test studentized by it — the gate's (`stats.cost_test`)",
}


@dataclass(frozen=True)
class SpendScenario:
    name: str
    truth: str
    tasks: int
    runs: int
    alpha: float  # the cost test's level: 0.0225 at generation 0, 0.01125 at generation 1
    saving: float = 0.0
    runaways: float = 0.0
    dominant: float | None = None
    dominant_sigma: float = SIGMA
    total_change: float | None = None  # with a dominant task +10 %: the others keep the total at this ratio
    shared_sd: float = 0.0
    power: bool = False


def spend_scenarios() -> tuple[SpendScenario, ...]:
    return (
        SpendScenario("T1", "identical", 12, 3, 0.0225),
        SpendScenario("T2", "identical; (task, arm) effects τ = 0.2", 6, 10, 0.0225, shared_sd=0.2),
        SpendScenario("T3", "identical; 5 % runaways (5–10×)", 12, 5, 0.0225, runaways=0.05),
        SpendScenario("T4", "identical; 5 % runaways (5–10×)", 34, 3, 0.0225, runaways=0.05),
        SpendScenario(
            "T5", "identical; one task 30× and noisier (σ 0.8)", 12, 5, 0.0225, dominant=30.0, dominant_sigma=0.8
        ),
        SpendScenario(
            "T6",
            "equal total: the 30× task (σ 0.8) +10 %, the others −27 %",
            12,
            5,
            0.0225,
            dominant=30.0,
            dominant_sigma=0.8,
            total_change=1.0,
        ),
        SpendScenario(
            "T7",
            "5 % dearer in total: the 30× task (σ 0.8) +10 %, the others −8.6 %",
            12,
            5,
            0.0225,
            dominant=30.0,
            dominant_sigma=0.8,
            total_change=1.05,
        ),
        SpendScenario("W1", "15 % cheaper", 34, 3, 0.01125, saving=0.15, power=True),
        SpendScenario("W2", "15 % cheaper", 12, 5, 0.01125, saving=0.15, power=True),
        SpendScenario("W3", "15 % cheaper", 6, 21, 0.0225, saving=0.15, power=True),
        SpendScenario("W4", "15 % cheaper; 5 % runaways", 34, 3, 0.01125, saving=0.15, runaways=0.05, power=True),
    )


def _spend_draw(rng: np.random.Generator, scenario: SpendScenario) -> tuple[np.ndarray, np.ndarray]:
    """Both arms' run costs, (tasks, runs) each."""
    tasks = scenario.tasks
    sigmas = np.full(tasks, SIGMA)
    effects = np.full(tasks, math.log(1 - scenario.saving))
    if scenario.dominant is None:
        base = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, tasks)
    else:
        base = np.zeros(tasks)
        base[0] = math.log(scenario.dominant)
        sigmas[0] = scenario.dominant_sigma
        if scenario.total_change is not None:
            rest = tasks - 1
            total = scenario.dominant + rest
            effects[:] = math.log((total * scenario.total_change - scenario.dominant * 1.1) / rest)
            effects[0] = math.log(1.1)
    arms = []
    for effect in (np.zeros(tasks), effects):
        logs = (base + effect)[:, None] + rng.normal(0.0, scenario.shared_sd, (tasks, 1)) * bool(scenario.shared_sd)
        costs = np.exp(logs + sigmas[:, None] * rng.normal(0.0, 1.0, (tasks, scenario.runs)))
        if scenario.runaways:
            hit = rng.random(costs.shape) < scenario.runaways
            costs = np.where(hit, costs * rng.uniform(*RUNAWAY_FACTORS, costs.shape), costs)
        arms.append(costs)
    return arms[0], arms[1]


def spend_p_values(incumbent: np.ndarray, candidate: np.ndarray, alpha: float) -> dict[str, float]:
    """Each candidate spend test's one-sided p-value of "no saving" in total spend on one drawn suite."""
    from scipy import stats as sps
    from skillbench.decision import stats as gate_stats

    tasks = incumbent.shape[0]
    a, b = incumbent.mean(axis=1), candidate.mean(axis=1)
    ratios, weights = np.log(a / b), (a + b) / (a + b).sum()
    estimate = math.log(a.sum() / b.sum())
    squares = float(np.dot(weights, weights))
    old_se = math.sqrt(ratios.var(ddof=1) * squares)
    values = {"t": float(sps.t.sf(estimate / old_se, tasks - 1))}
    influence = a / a.sum() - b / b.sum()
    values["sandwich"] = float(
        sps.t.sf(estimate / math.sqrt(tasks / (tasks - 1) * np.dot(influence, influence)), tasks - 1)
    )
    # CR2 (Bell-McCaffrey) for the weighted mean of the ratios, the weights taken as fixed.
    residuals = ratios - np.dot(weights, ratios)
    adjust = weights * weights / (1 - 2 * weights + squares)
    projector = np.eye(tasks) - np.outer(np.ones(tasks), weights)
    matrix = projector.T @ np.diag(adjust) @ projector
    cr2_df = np.trace(matrix) ** 2 / np.trace(matrix @ matrix)
    values["cr2"] = float(sps.t.sf(estimate / math.sqrt(np.dot(adjust, residuals**2)), cr2_df))
    cells = [(list(inc), list(cand)) for inc, cand in zip(incumbent, candidate, strict=True)]
    plain = gate_stats.sign_flip_test(list(ratios), list(weights), objective="total_spend", alpha=alpha)
    values["t+flip"] = max(values["t"], plain["p_value"]) if plain["applies"] else values["t"]
    test = gate_stats.cost_test(cells, alpha=alpha, floor_pct=0.0)
    values["runs"] = test["t_p_value"]
    values["runs+flip"] = test["p_value"]
    return values


def run_spend_row(job: tuple[str, int, int]) -> dict[str, int]:
    name, trials, seed = job
    scenario = next(s for s in spend_scenarios() if s.name == name)
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(SPEND_TESTS, 0)
    for _ in range(trials):
        for test, p_value in spend_p_values(*_spend_draw(rng, scenario), scenario.alpha).items():
            counts[test] += p_value <= scenario.alpha
    return counts


def spend_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """The spend tests the gate could use, on the same draws: rejection rates at the cost test's level."""
    trials, rows = args.spend_trials, spend_scenarios()
    started = time.monotonic()
    counts = run_named_rows(run_spend_row, [s.name for s in rows], trials, (args.seed, 67867967), args.workers)
    header = ["row", "truth", "tasks × runs", "level", *SPEND_TESTS]
    lines = []
    for scenario in rows:
        count = counts[scenario.name]
        cells = [scenario.name, scenario.truth, f"{scenario.tasks} × {scenario.runs}", f"{scenario.alpha:g}"]
        for test in SPEND_TESTS:
            text = rate_text(count[test], trials)
            if not scenario.power and count[test] / trials > scenario.alpha + 2 * math.sqrt(scenario.alpha / trials):
                text = f"**{text}**"
            cells.append(text)
        lines.append(cells)
    body = "\n".join(
        [
            f'Rejection rate of "no saving" in total spend, in percent ± its Monte-Carlo standard error, at the cost '
            f"test's level (generation 0: 0.0225; W1, W2, W4 generation 1: 0.01125); {trials} simulated suites per "
            f"row, seed {args.seed}; every column sees the same draws. T rows: candidates no cheaper in total (a rate "
            "above the level by more than two standard errors in bold); W rows: power. Tests: "
            + "; ".join(f"**{key}**: {text}" for key, text in SPEND_TESTS.items())
            + ".",
            "",
            markdown_table(header, lines),
        ]
    )
    return [], {**counts, "seconds": finish_part(args, body, started, (SPEND_START, SPEND_END))}


# ─── Several candidates per generation: a race under error control ──────────

RACE_START, RACE_END = "<!-- race:start -->", "<!-- race:end -->"
RACE_GENERATIONS = 6
RACE_TASKS = 12  # exact sign flips (2^12): every decision stays cheap at a late generation's small alpha
RACE_SCREEN_RUNS = 2  # runs per cell of a screening look: it ranks candidates, it decides nothing
RACE_SAVING = 0.15
RACE_MOMENT = 0.1  # the arm-moment rows' η: the sd of a log-cost effect every cell of one batch shares
RACE_RUNAWAYS = 0.05
# (name, kind, K): today's one candidate per generation; K candidates Holm-adjusted within the generation's share;
# K candidates screened without alpha, the best confirmed on fresh cells at an equal share of the experiment's alpha
# (race) or at alpha halved once per confirmation run (race-halving: a generation that confirms nothing spends none).
RACE_SCHEMES = (
    ("today", "today", 1),
    ("holm K=2", "holm", 2),
    ("holm K=4", "holm", 4),
    ("race K=1", "race", 1),
    ("race K=2", "race", 2),
    ("race K=4", "race", 4),
    ("race K=4, halving", "race-halving", 4),
)


@dataclass(frozen=True)
class RaceScenario:
    name: str
    truth: str
    good: float  # the chance that a proposed candidate is 15 % cheaper (else it is identical to the incumbent)
    moment: float = 0.0
    runaways: float = 0.0
    late: bool = False  # also decide another last generation whose candidates are all 15 % cheaper (power there)


def race_scenarios() -> tuple[RaceScenario, ...]:
    return (
        RaceScenario("Z1", "every candidate identical; lognormal runs", 0.0, late=True),
        RaceScenario(
            "Z2",
            f"every candidate identical; arm moment η = {RACE_MOMENT:g} per batch, "
            f"{RACE_RUNAWAYS:.0%} runaways (5–10×)",
            0.0,
            moment=RACE_MOMENT,
            runaways=RACE_RUNAWAYS,
        ),
        RaceScenario("W1", "every candidate 15 % cheaper; lognormal runs", 1.0),
        RaceScenario(
            "M1",
            f"each candidate 15 % cheaper with chance 1/4, else identical; arm moment η = {RACE_MOMENT:g}",
            0.25,
            moment=RACE_MOMENT,
        ),
    )


def race_design() -> tuple[int, int]:
    """The decision design: the runs ``skillbench estimate`` recommends for a 15 % saving with the race's tasks at
    generation 0 (today's design there: about 80 % power)."""
    return recommended_design(100 * RACE_SAVING, tasks=RACE_TASKS, shared_sd=0.0, generation=0)


def route_alphas(alpha: float) -> dict[str, float]:
    """The nominal levels one decision at ``alpha`` spends (the gate's split: the cost route, the resolution route,
    non-inferiority), passed to ``evaluate_candidate`` as a look's alphas."""
    from skillbench.decision.significance import RESOLUTION_ROUTE_SHARE

    return {
        "cost": alpha * (1 - RESOLUTION_ROUTE_SHARE),
        "resolution": alpha * RESOLUTION_ROUTE_SHARE,
        "quality": alpha,
    }


def holm_promoted(promotes: Callable[[int, float], bool], candidates: list[int], alpha: float) -> list[int]:
    """Holm's step-down over the candidates' decisions: every remaining candidate is decided at alpha / (how many
    remain); those promoted leave and the rest are decided again at the larger level, until none passes."""
    remaining, promoted = list(candidates), []
    while remaining:
        passed = [candidate for candidate in remaining if promotes(candidate, alpha / len(remaining))]
        if not passed:
            break
        promoted += passed
        remaining = [candidate for candidate in remaining if candidate not in passed]
    return promoted


def _race_batch(
    rng: np.random.Generator, scenario: RaceScenario, levels: np.ndarray, good: np.ndarray, runs: int, batch: str
) -> tuple[list[dict], list[list[dict]]]:
    """One batch: the anchor's rows and each candidate's, every cell of it in one moment."""
    noise_scenario = NoiseScenario(batch, "", RACE_TASKS, runs)
    moment = float(rng.normal(0.0, scenario.moment)) if scenario.moment else 0.0
    sigmas = np.full(RACE_TASKS, SIGMA)
    anchor = _noise_rows(rng, noise_scenario, INCUMBENT, levels, sigmas, [moment] * runs, batch, scenario.runaways)
    candidates = [
        _noise_rows(
            rng,
            noise_scenario,
            CANDIDATE,
            levels + (math.log(1 - RACE_SAVING) if better else 0.0),
            sigmas,
            [moment] * runs,
            batch,
            scenario.runaways,
        )
        for better in good
    ]
    return anchor, candidates


def _screen_estimate(anchor: list[dict], candidate: list[dict]) -> float:
    """The estimand the cost test decides on (log ratio of the suite's totals), from ``stats.cost_components``."""
    from skillbench.decision import stats as gate_stats

    cells: dict[str, tuple[list[float], list[float]]] = {}
    for row in anchor:
        cells.setdefault(row["task"], ([], []))[0].append(row["cost_usd"])
    for row in candidate:
        cells.setdefault(row["task"], ([], []))[1].append(row["cost_usd"])
    components = gate_stats.cost_components(list(cells.values()), "total_spend")
    return -math.inf if components is None else components[2]


def _race_generation(
    rng: np.random.Generator, scenario: RaceScenario, levels: np.ndarray, generation: int, good: np.ndarray
) -> dict:
    """A generation's draws: which candidates are better, a screening batch and a decision batch (both with their
    anchor), and a cache of decisions per (candidate, alpha)."""
    runs = race_design()[1]
    screen = _race_batch(rng, scenario, levels, good, RACE_SCREEN_RUNS, f"gen{generation}/screen")
    full = _race_batch(rng, scenario, levels, good, runs, f"gen{generation}/decide")
    return {"good": good, "screen": screen, "full": full, "decisions": {}}


def _race_promotes(drawn: dict, candidate: int, alpha: float) -> bool:
    key = (candidate, round(alpha, 12))
    if key not in drawn["decisions"]:
        anchor, candidates = drawn["full"]
        decision = decision_of(anchor + candidates[candidate], "noise_aware", 0, route_alphas(alpha))
        drawn["decisions"][key] = decision["decision"] == "promote"
    return drawn["decisions"][key]


def _race_step(
    scheme: tuple[str, str, int], drawn: dict, generation: int, policy, confirmations: int
) -> tuple[int | None, int, bool]:
    """One scheme's generation on the drawn cells: the candidate it promotes (or None), the sessions it paid and
    whether it ran a confirmation (``confirmations``: how many it ran before)."""
    from skillbench.decision.stats import log_of_saving

    _, kind, k = scheme
    tasks, runs = race_design()
    decide_cells = tasks * runs
    if kind in ("today", "holm"):
        share = generation_alpha_of(policy, generation)
        promoted = holm_promoted(lambda c, a: _race_promotes(drawn, c, a), list(range(k)), share)
        estimates = {c: _screen_estimate(drawn["full"][0], drawn["full"][1][c]) for c in promoted}
        best = max(promoted, key=lambda c: estimates[c]) if promoted else None
        return best, (k + 1) * decide_cells, False
    sessions = (k + 1) * tasks * RACE_SCREEN_RUNS
    anchor, candidates = drawn["screen"]
    estimates = [_screen_estimate(anchor, candidates[c]) for c in range(k)]
    finalist = int(np.argmax(estimates))
    if estimates[finalist] < log_of_saving(policy.min_improvement_pct):
        return None, sessions, False
    share = policy.alpha / RACE_GENERATIONS if kind == "race" else policy.alpha / 2 ** (confirmations + 1)
    return (finalist if _race_promotes(drawn, finalist, share) else None), sessions + 2 * decide_cells, True


def run_race_row(job: tuple[str, int, int]) -> dict:
    """Per scheme over ``trials`` experiments of six generations (each stops at its first promotion): experiments
    that promoted, promoted a better candidate (by generation) or a no-better one, the sessions paid, and (``late``
    rows) a better candidate promoted in another last generation whose candidates are all better."""
    name, trials, seed = job
    scenario = next(s for s in race_scenarios() if s.name == name)
    policy = rule_policy("noise_aware")
    k_max = max(k for _, _, k in RACE_SCHEMES)
    rng = np.random.default_rng(seed)
    counts = {
        scheme[0]: {
            "promoted": 0,
            "correct": 0,
            "wrong": 0,
            "by_generation": [0] * RACE_GENERATIONS,
            "sessions": 0,
            "late_correct": 0,
        }
        for scheme in RACE_SCHEMES
    }
    for _ in range(trials):
        levels = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, RACE_TASKS)
        generations = [
            _race_generation(rng, scenario, levels, generation, rng.random(k_max) < scenario.good)
            for generation in range(RACE_GENERATIONS)
        ]
        late = _race_generation(rng, scenario, levels, RACE_GENERATIONS - 1, np.ones(k_max, dtype=bool))
        for scheme in RACE_SCHEMES:
            count, stopped, confirmations = counts[scheme[0]], False, 0
            for generation, drawn in enumerate(generations):
                if generation == RACE_GENERATIONS - 1 and scenario.late and not stopped:
                    count["late_correct"] += _race_step(scheme, late, generation, policy, confirmations)[0] is not None
                if stopped:
                    continue
                promoted, sessions, confirmed = _race_step(scheme, drawn, generation, policy, confirmations)
                count["sessions"] += sessions
                confirmations += confirmed
                if promoted is None:
                    continue
                stopped = True
                count["promoted"] += 1
                if drawn["good"][promoted]:
                    count["correct"] += 1
                    count["by_generation"][generation] += 1
                else:
                    count["wrong"] += 1
    return counts


def race_part(args: argparse.Namespace) -> tuple[list[str], dict]:
    """Today's one candidate per generation against K candidates per generation (Holm within the generation's
    share; a screen without alpha and one confirmation at an equal share of the experiment's alpha), same draws."""
    trials, rows = args.race_trials, race_scenarios()
    tasks, runs = race_design()
    started = time.monotonic()
    counts = run_named_rows(run_race_row, [s.name for s in rows], trials, (args.seed, 86028121), args.workers)
    missed: list[str] = []

    def rate(row: str, scheme: str, key: str) -> str:
        return rate_text(counts[row][scheme][key], trials)

    def per_correct(row: str, scheme: str) -> str:
        count = counts[row][scheme]
        return f"{count['sessions'] / count['correct']:.0f}" if count["correct"] else "—"

    def first_generation(row: str, scheme: str) -> str:
        by = counts[row][scheme]["by_generation"]
        return f"{sum(g * n for g, n in enumerate(by)) / sum(by):.2f}" if sum(by) else "—"

    header = [
        "scheme",
        "Z1 false promotion",
        "Z2 false promotion",
        "W1 power at generation 0",
        "Z1 power at generation 5 (after five null generations)",
        "generation 5 / generation 0",
        "W1 sessions per correct promotion",
        "M1 correct promotion",
        "M1 no-better promoted",
        "M1 first correct promotion (mean generation)",
        "M1 sessions per correct promotion",
    ]
    lines = []
    for name, _, _ in RACE_SCHEMES:
        power0 = counts["W1"][name]["by_generation"][0] / trials
        power5 = counts["Z1"][name]["late_correct"] / trials
        for row in ("Z1", "Z2"):
            if not met(Scenario(row, "", "", 1, 1, goal_max=0.05), counts[row][name]["promoted"], trials):
                missed.append(f"race/{name}/{row}")
        lines.append(
            [
                name,
                rate("Z1", name, "promoted"),
                rate("Z2", name, "promoted"),
                rate_text(counts["W1"][name]["by_generation"][0], trials),
                rate("Z1", name, "late_correct"),
                f"{power5 / power0:.2f}" if power0 else "—",
                per_correct("W1", name),
                rate("M1", name, "correct"),
                rate("M1", name, "wrong"),
                first_generation("M1", name),
                per_correct("M1", name),
            ]
        )
    scheme_text = (
        f"**today**: one candidate per generation on {tasks} × {runs} beside its anchor, generation g at α/2^(g+1); "
        f"**holm K**: K candidates on {tasks} × {runs} each beside one shared anchor, Holm's step-down over their "
        "decisions within the generation's α/2^(g+1), the best promoted by the estimand; **race K**: K candidates "
        f"screened on {tasks} × {RACE_SCREEN_RUNS} beside a shared anchor (no α spent; the finalist is the largest "
        "estimated saving, and only one of at least `min_improvement_pct` goes on), then the finalist confirmed on "
        f"fresh cells ({tasks} × {runs} beside a fresh anchor) at α/{RACE_GENERATIONS} (an equal share of the "
        f"experiment's α over its {RACE_GENERATIONS} planned generations); **race K=4, halving**: the same race, "
        "the j-th confirmation run (from 0) at α/2^(j+1), so a generation that confirms nothing spends nothing"
    )
    body = "\n".join(
        [
            f"Experiments of {RACE_GENERATIONS} generations, each stopping at its first promotion; every decision by "
            "`gate.evaluate_candidate` (default policy, α = 0.05) at the scheme's level; the screening estimate is "
            f"`stats.cost_components`' (the cost test's estimand). {trials} simulated experiments per row, seed "
            f"{args.seed}; every scheme sees the same draws. {RACE_TASKS} tasks, log-cost levels uniform over "
            f"±{BASELINE_SPREAD:g}, lognormal run noise σ = {SIGMA:g}; every batch (a generation's screen, its "
            "decision batch) has its own moment where the row says, shared by the anchor and the candidates in it. "
            f"Schemes: {scheme_text}. Rows: " + "; ".join(f"**{s.name}**: {s.truth}" for s in rows) + ". Rates in "
            "percent ± the Monte-Carlo standard error. Power at generation 5: Z1's experiments given another last "
            "generation whose candidates are all 15 % cheaper (no promotion before it). Sessions: every paid session "
            "until the first promotion or the sixth generation, anchors included, over the correct promotions.",
            "",
            markdown_table(header, lines),
        ]
    )
    raw = {name: counts[name] for name in counts}
    return missed, {**raw, "seconds": finish_part(args, body, started, (RACE_START, RACE_END))}


PARTS: dict[str, Callable[[argparse.Namespace], tuple[list[str], dict]]] = {
    "rules": rules_part,
    "sequential": sequential_part,
    "agents": agents_part,
    "review": review_part,
    "trigger": trigger_part,
    "spend": spend_part,
    "noise": noise_part,
    "race": race_part,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000, help="simulated experiments per row and rule")
    parser.add_argument("--sequential-trials", type=int, default=1000, help="simulated decisions per sequential row")
    parser.add_argument("--futility", type=float, nargs="+", default=[0.1], help="futility levels to compare")
    parser.add_argument("--agent-trials", type=int, default=400, help="simulated generations per three-agent row")
    parser.add_argument("--review-trials", type=int, default=400, help="simulated experiments per review row")
    parser.add_argument("--trigger-trials", type=int, default=400, help="simulated experiments per trigger row")
    parser.add_argument("--noise-trials", type=int, default=400, help="simulated experiments per noise row")
    parser.add_argument(
        "--race-trials", type=int, default=200, help="simulated six-generation experiments per race row"
    )
    parser.add_argument("--spend-trials", type=int, default=2000, help="simulated suites per spend-test row")
    parser.add_argument("--only", nargs="+", help="the noise part's rows to run (default: all; for a quick look)")
    parser.add_argument("--before", type=Path, help="an earlier run's --json (main's gate): the noise table's before")
    parser.add_argument(
        "--part",
        nargs="+",
        choices=("all", *PARTS),
        default=["all"],
        help="the parts to run, in this order (default: all, in the order listed)",
    )
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--docs", type=Path, default=DOCS, help="Markdown file whose marked tables are rewritten")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument("--json", type=Path, help="also write the raw counts (and the designs used) here")
    parser.add_argument("--designs", type=Path, help="take the designs from an earlier run's --json (an older gate)")
    args = parser.parse_args(argv)
    if args.designs:
        FIXED_DESIGNS.update(json.loads(args.designs.read_text())["designs"])
    missed: list[str] = []
    raw: dict = {}
    for part in PARTS if "all" in args.part else args.part:
        found, counts = PARTS[part](args)
        missed += found
        raw[part] = counts
    if args.json:
        scenarios()  # fills FIXED_DESIGNS in this process
        document = {"trials": args.trials, "designs": FIXED_DESIGNS, **raw}
        args.json.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    if missed:
        print(f"goals missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
