"""Decision quality of the promotion gate under noise: how often each rule promotes in known situations.

Simulates paired result rows for five scenarios (the null, a real 15 % saving, the same with
flaky tasks, a cheaper candidate that resolves less, a flaky null), under three noise models
(lognormal σ = 0.3, a log-t with 3 degrees of freedom and the same standard deviation, and the
lognormal with an occasional 3× run), runs every simulated generation through the gate's own
decision function (``skillbench.decision.gate.evaluate_candidate``, the one the pipeline and
``skillbench gate`` call), and prints the promotion rate with its Monte-Carlo standard error.

    .venv/bin/python bench/decision_quality.py                 # 4,000 trials per cell; rewrites docs/gate.md
    .venv/bin/python bench/decision_quality.py --trials 500 --no-docs
    .venv/bin/python bench/decision_quality.py --part sequential   # fixed (runs: 5) vs sequential table only

The sequential table adds S6 (a candidate 10 % more expensive) and compares, per scenario, the
promotion rate and the paid sessions per decision of the fixed design and the sequential default
(``gate.sequential_decision``, the function the pipeline's looks call).

The draws are seeded, so a rerun prints the same table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.gate import evaluate_candidate, run_design, sequential_decision

INCUMBENT, CANDIDATE = "workflow", "candidate_workflow"
SIGMA = 0.3
BASELINE_SPREAD = 1.0  # task log-cost means are uniform on ±1: tasks differ up to e² ≈ 7× in cost
T_DF = 3
OUTLIER_SHARE, OUTLIER_FACTOR = 0.1, 3.0
RULES = ("noise_aware", "upstream")
NOISES = {
    "lognormal": "lognormal σ = 0.3",
    "log-t": "log-t, 3 df, sd 0.3",
    "mixture": "lognormal σ = 0.3, 10 % of runs 3×",
}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "gate.md"
START, END = "<!-- decision-quality:start -->", "<!-- decision-quality:end -->"
SEQ_START, SEQ_END = "<!-- sequential:start -->", "<!-- sequential:end -->"
FIXED_RUNS = 5
SEQUENTIAL_RUNS = {"min": 2, "max": 10, "step": 1}


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    tasks: int
    runs: int
    saving: float  # true multiplicative saving of the candidate (0.15 = 15 % cheaper)
    incumbent_resolves: float
    candidate_resolves: float
    goal: str
    goal_max: float | None = None
    goal_min: float | None = None


SCENARIOS = (
    Scenario("S1", "null", 6, 3, 0.0, 1.0, 1.0, "≤ 5 %", goal_max=0.05),
    Scenario("S2", "power", 10, 5, 0.15, 1.0, 1.0, "≥ 80 %", goal_min=0.80),
    Scenario("S3", "flaky power", 10, 5, 0.15, 0.9, 0.9, "≥ 70 %", goal_min=0.70),
    Scenario("S4", "quality", 10, 5, 0.30, 0.9, 0.75, "≤ 10 %", goal_max=0.10),
    Scenario("S5", "flaky null", 6, 3, 0.0, 0.9, 0.9, "≤ 5 %", goal_max=0.05),
)
# The sequential comparison adds a candidate that is 10 % more expensive; its goals are the sequential default's.
S6 = Scenario("S6", "costlier", 10, 5, -0.10, 1.0, 1.0, "—")
SEQUENTIAL_SCENARIOS = (*SCENARIOS, S6)
SEQUENTIAL_GOALS = {
    "S1": ("≤ 5 %", 0.05, None),
    "S2": ("≥ 80 %", None, 0.80),
    "S4": ("≤ 10 %", 0.10, None),
    "S5": ("≤ 5 %", 0.05, None),
}
SESSION_SCENARIOS = ("S1", "S2", "S4", "S6")
SESSION_GOAL = 0.60


def noise(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """Log-scale run-to-run noise."""
    if kind == "lognormal":
        return rng.normal(0.0, SIGMA, shape)
    if kind == "log-t":
        return SIGMA * rng.standard_t(T_DF, shape) / math.sqrt(T_DF / (T_DF - 2))
    if kind == "mixture":
        return rng.normal(0.0, SIGMA, shape) + math.log(OUTLIER_FACTOR) * (rng.random(shape) < OUTLIER_SHARE)
    raise ValueError(kind)


def simulate_rows(rng: np.random.Generator, scenario: Scenario, kind: str) -> list[dict]:
    """One generation's rows: every (task, arm, run) with a cost and an oracle outcome."""
    shape = (scenario.tasks, scenario.runs)
    baselines = rng.uniform(-BASELINE_SPREAD, BASELINE_SPREAD, scenario.tasks)
    arms = {
        INCUMBENT: (baselines[:, None] + noise(rng, kind, shape), rng.random(shape) < scenario.incumbent_resolves),
        CANDIDATE: (
            baselines[:, None] + math.log(1 - scenario.saving) + noise(rng, kind, shape),
            rng.random(shape) < scenario.candidate_resolves,
        ),
    }
    rows = []
    for task in range(scenario.tasks):
        for run in range(scenario.runs):
            for arm, (log_costs, resolved) in arms.items():
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


def run_cell(job: tuple[int, str, int, int]) -> dict[str, int]:
    """Promotions per rule over ``trials`` seeded generations of one (scenario, noise) cell."""
    index, kind, trials, seed = job
    scenario = SCENARIOS[index]
    rng = np.random.default_rng(seed)
    promoted = dict.fromkeys(RULES, 0)
    for _ in range(trials):
        rows = simulate_rows(rng, scenario, kind)
        by_task = aggregate_by_task(rows)
        for rule in RULES:
            decision = evaluate_candidate(
                by_task,
                incumbent_arm=INCUMBENT,
                candidate_arm=CANDIDATE,
                model="simulated-model",
                policy={"rule": rule},
                rows=rows,
            )
            promoted[rule] += decision["decision"] == "promote"
    return promoted


def run_sequential_cell(job: tuple[int, int, int]) -> dict[str, int]:
    """Promotions and sessions of the fixed design (runs: 5) and the sequential default on the same draws.

    Each trial draws ``max`` runs per cell; the fixed design sees the first five, the sequential
    design replays its looks over the runs in order (``sequential_decision``, the function the
    pipeline's looks and ``skillbench gate`` use) and pays for the runs its last look used.
    """
    index, trials, seed = job
    scenario = SEQUENTIAL_SCENARIOS[index]
    design = run_design(SEQUENTIAL_RUNS)
    rng = np.random.default_rng(seed)
    counts = {"fixed_promoted": 0, "fixed_sessions": 0, "sequential_promoted": 0, "sequential_sessions": 0}
    drawn = Scenario(**{**scenario.__dict__, "runs": design["max"]})
    for _ in range(trials):
        rows = simulate_rows(rng, drawn, "lognormal")
        fixed_rows = [row for row in rows if row["run"] < FIXED_RUNS]
        fixed = evaluate_candidate(
            aggregate_by_task(fixed_rows),
            incumbent_arm=INCUMBENT,
            candidate_arm=CANDIDATE,
            model="simulated-model",
            policy={},
            rows=fixed_rows,
        )
        counts["fixed_promoted"] += fixed["decision"] == "promote"
        counts["fixed_sessions"] += 2 * scenario.tasks * FIXED_RUNS
        sequential = sequential_decision(
            rows, incumbent_arm=INCUMBENT, candidate_arm=CANDIDATE, model="simulated-model", policy={}, design=design
        )
        counts["sequential_promoted"] += sequential["decision"] == "promote"
        counts["sequential_sessions"] += 2 * scenario.tasks * sequential["looks"][-1]["runs"]
    return counts


def sequential_table(results: dict[str, dict[str, int]], trials: int) -> tuple[str, list[str]]:
    """Markdown: per scenario, promotion rate and sessions per decision of both designs; and the goals missed."""
    header = [
        "scenario",
        "tasks",
        "truth",
        "fixed · promoted",
        "fixed · sessions",
        "sequential · promoted",
        "sequential · sessions",
        "goal (sequential)",
    ]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    missed = []
    for scenario in SEQUENTIAL_SCENARIOS:
        counts = results[scenario.name]
        resolves = (
            "all resolve"
            if scenario.incumbent_resolves == scenario.candidate_resolves == 1
            else f"resolve {scenario.incumbent_resolves:.0%} / {scenario.candidate_resolves:.0%}"
        )
        if scenario.saving > 0:
            truth = f"{scenario.saving:.0%} cheaper"
        elif scenario.saving < 0:
            truth = f"{-scenario.saving:.0%} more expensive"
        else:
            truth = "identical cost"
        goal_text = "—"
        if scenario.name in SEQUENTIAL_GOALS:
            goal_text, high, low = SEQUENTIAL_GOALS[scenario.name]
            rate = counts["sequential_promoted"] / trials
            met = (high is None or rate <= high) and (low is None or rate >= low)
            goal_text += " met" if met else " MISSED"
            if not met:
                missed.append(scenario.name)
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{scenario.name} {scenario.title}",
                    str(scenario.tasks),
                    f"{truth}, {resolves}",
                    rate_text(counts["fixed_promoted"], trials),
                    f"{counts['fixed_sessions'] / trials:.1f}",
                    rate_text(counts["sequential_promoted"], trials),
                    f"{counts['sequential_sessions'] / trials:.1f}",
                    goal_text,
                ]
            )
            + " |"
        )
    fixed_mean = sum(results[name]["fixed_sessions"] for name in SESSION_SCENARIOS) / trials / len(SESSION_SCENARIOS)
    seq_mean = sum(results[name]["sequential_sessions"] for name in SESSION_SCENARIOS) / trials / len(SESSION_SCENARIOS)
    ratio = seq_mean / fixed_mean
    met = ratio <= SESSION_GOAL
    if not met:
        missed.append("sessions")
    lines.append(
        f"\nMean sessions per decision over {', '.join(SESSION_SCENARIOS)}: fixed {fixed_mean:.1f}, sequential "
        f"{seq_mean:.1f} = {100 * ratio:.0f} % of the fixed design's (goal ≤ {100 * SESSION_GOAL:.0f} %: "
        f"{'met' if met else 'MISSED'})."
    )
    return "\n".join(lines), missed


def rate_text(count: int, trials: int) -> str:
    rate = count / trials
    return f"{100 * rate:.1f} ± {100 * math.sqrt(rate * (1 - rate) / trials):.1f}"


def meets(scenario: Scenario, count: int, trials: int) -> bool:
    rate = count / trials
    if scenario.goal_max is not None:
        return rate <= scenario.goal_max
    return rate >= (scenario.goal_min or 0.0)


def table(results: dict[tuple[str, str], dict[str, int]], trials: int) -> str:
    """Markdown: one row per scenario, one column per (rule, noise); the default rule's goal last."""
    header = ["scenario", "design", "truth"]
    header += [f"{rule} · {kind}" for rule in RULES for kind in NOISES]
    header += ["goal (noise_aware, lognormal)"]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] * len(header)) + " |"]
    for scenario in SCENARIOS:
        resolves = (
            "all resolve"
            if scenario.incumbent_resolves == scenario.candidate_resolves == 1
            else f"resolve {scenario.incumbent_resolves:.0%} / {scenario.candidate_resolves:.0%}"
        )
        truth = f"{scenario.saving:.0%} cheaper" if scenario.saving else "identical cost"
        cells = [f"{scenario.name} {scenario.title}", f"{scenario.tasks} × {scenario.runs}", f"{truth}, {resolves}"]
        for rule in RULES:
            for kind in NOISES:
                cells.append(rate_text(results[(scenario.name, kind)][rule], trials))
        met = meets(scenario, results[(scenario.name, "lognormal")]["noise_aware"], trials)
        cells.append(f"{scenario.goal} {'met' if met else 'MISSED'}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_docs(path: Path, body: str, start: str = START, end: str = END) -> None:
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise SystemExit(f"{path}: markers {start} … {end} not found; add them where the table belongs")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{body}\n{end}{tail}", encoding="utf-8")


def rules_part(args: argparse.Namespace) -> list[str]:
    """The rules table (both rules, three noise models); returns the scenarios whose goal the default missed."""
    jobs = [
        (index, kind, args.trials, args.seed + 1000 * index + position)
        for index in range(len(SCENARIOS))
        for position, kind in enumerate(NOISES)
    ]
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        counts = list(pool.map(run_cell, jobs))
    results = {(SCENARIOS[job[0]].name, job[1]): count for job, count in zip(jobs, counts, strict=True)}
    elapsed = time.monotonic() - started

    body = "\n".join(
        [
            f"Promotion rate in percent ± its Monte-Carlo standard error; {args.trials} simulated generations per "
            f"cell, seed {args.seed}; both rules see the same draws. Task log-cost means are spread uniformly over "
            f"±{BASELINE_SPREAD:g}; noise: " + "; ".join(f"{kind} = {text}" for kind, text in NOISES.items()) + ".",
            "",
            table(results, args.trials),
        ]
    )
    print(body)
    print(f"\n({elapsed:.0f} s on {args.workers} worker(s))", file=sys.stderr)
    if not args.no_docs:
        write_docs(args.docs, body)
        print(f"wrote the table into {args.docs}", file=sys.stderr)
    return [s.name for s in SCENARIOS if not meets(s, results[(s.name, "lognormal")]["noise_aware"], args.trials)]


def sequential_part(args: argparse.Namespace) -> list[str]:
    """Fixed (runs: 5) vs the sequential default on the same draws; returns the goals missed."""
    trials = args.sequential_trials
    jobs = [(index, trials, args.seed + 7919 * (index + 1)) for index in range(len(SEQUENTIAL_SCENARIOS))]
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        counts = list(pool.map(run_sequential_cell, jobs))
    results = {SEQUENTIAL_SCENARIOS[job[0]].name: count for job, count in zip(jobs, counts, strict=True)}
    elapsed = time.monotonic() - started
    body_table, missed = sequential_table(results, trials)
    design = run_design(SEQUENTIAL_RUNS)
    body = "\n".join(
        [
            f"Fixed design `runs: {FIXED_RUNS}` vs the sequential default `runs: {{min: {SEQUENTIAL_RUNS['min']}, "
            f"max: {SEQUENTIAL_RUNS['max']}, step: {SEQUENTIAL_RUNS['step']}}}` ({design['spending']} spending, "
            f"futility below conditional power {design['futility_power']:g}); noise_aware rule, lognormal σ = "
            f"{SIGMA:g}; {trials} simulated decisions per scenario, seed {args.seed}; both designs see the same "
            "draws (the fixed design the first five runs of each cell). Promotion rate in percent ± its Monte-Carlo "
            "standard error; sessions = paid sessions per decision, both arms of the pair.",
            "",
            body_table,
        ]
    )
    print(body)
    print(f"\n({elapsed:.0f} s on {args.workers} worker(s))", file=sys.stderr)
    if not args.no_docs:
        write_docs(args.docs, body, SEQ_START, SEQ_END)
        print(f"wrote the sequential table into {args.docs}", file=sys.stderr)
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=4000, help="simulated generations per scenario and noise model")
    parser.add_argument(
        "--sequential-trials",
        type=int,
        default=2000,
        help="simulated decisions per scenario for the fixed-vs-sequential table",
    )
    parser.add_argument(
        "--part", choices=("all", "rules", "sequential"), default="all", help="which table to compute (default: both)"
    )
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--docs", type=Path, default=DOCS, help="Markdown file whose marked tables are rewritten")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    missed = []
    if args.part in ("all", "rules"):
        missed += rules_part(args)
    if args.part in ("all", "sequential"):
        missed += sequential_part(args)
    if missed:
        print(f"goals missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
