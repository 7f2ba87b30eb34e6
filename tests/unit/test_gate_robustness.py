"""The gate under the noise and the designs real runs bring: it never raises on a design the schema accepts, a
capped session is a counted observation, a noisy task that carries the spend is seen as noisy, and the spend test
holds its level where the t alone would not."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import numpy as np
import pytest
from rowfactory import MODEL, make_binding, make_row
from skillbench.base.artifacts import validate
from skillbench.decision import stats
from skillbench.decision.aggregate import aggregate_by_task
from skillbench.decision.gate import (
    evaluate_candidate,
    promotion_document,
    resolve_policy,
    run_design,
)

INC, CAND = "workflow", "candidate_workflow"
GENERATED_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def rows_of(costs: dict[str, tuple[list[float], list[float]]], fields: dict | None = None) -> list[dict]:
    """Rows of both arms from per-task (incumbent costs, candidate costs); every run resolves unless ``fields``
    say otherwise per (task, arm, run)."""
    rows = []
    for task, arms in costs.items():
        for arm, values in zip((INC, CAND), arms, strict=True):
            for run, cost in enumerate(values):
                extra = (fields or {}).get((task, arm, run), {})
                rows.append(make_row(task, arm, run, cost_usd=cost, **extra))
    return rows


def decide(rows: list[dict], generation: int = 0, **policy) -> dict:
    return evaluate_candidate(
        aggregate_by_task(rows),
        incumbent_arm=INC,
        candidate_arm=CAND,
        model=MODEL,
        policy=resolve_policy(policy),
        rows=rows,
        generation=generation,
    )


def document(rows: list[dict], *, generation: int, design: dict | None = None) -> dict:
    return validate(
        promotion_document(
            rows,
            pairs=[(INC, CAND)],
            policy=resolve_policy(None),
            binding=make_binding(
                [CAND],
                selected_tasks=[{"id": "t1", "oracle_digest": "7" * 64}],
                target_base_digests={".claude/skills/plan/SKILL.md": "a" * 64},
            ),
            run_status="complete",
            generated_at=GENERATED_AT,
            design=design,
            generation=generation,
        ),
        "promotion",
    )


# ─── Degenerate designs never crash the gate ────────────────────────────────


def test_a_tasks_interval_at_a_tiny_alpha_is_left_out_not_overflowed():
    """One degree of freedom at a late generation's alpha: the interval spans more than any number can say."""
    tiny = stats.task_saving([1.0, 4.0], [1.0, 4.0], objective="total_spend", alpha=1e-7)
    assert tiny == {"saving_pct": 0.0, "ci_low_pct": None, "ci_high_pct": None}
    usual = stats.task_saving([1.0, 4.0], [1.0, 4.0], objective="total_spend", alpha=0.05)
    assert usual["ci_low_pct"] < 0 < usual["ci_high_pct"]
    test = stats.cost_test([([1.0, 4.0], [0.9, 3.0]), ([2.0, 2.2], [1.0, 2.5])], alpha=1e-7, floor_pct=5.0)
    assert test["noise_measured"] and test["ci_low_pct"] is None and test["mde_pct"] is None
    assert 0 < test["p_value"] <= 1 and test["conclusion"] == "inconclusive"


def test_ratios_equal_up_to_recorded_rounding_claim_no_certainty():
    """Costs recorded to ten decimals: a candidate exactly 20 % cheaper everywhere, up to that rounding, is one
    number written twelve times, not a measured noise with p = 1e-10."""
    cells = []
    for index in range(12):
        incumbent = [round(0.0001 * (1 + index) * factor, 10) for factor in (1.0, 1.0, 1.0)]
        cells.append((incumbent, [round(0.8 * value, 10) for value in incumbent]))
    test = stats.cost_test(cells, alpha=0.0225, floor_pct=5.0)
    assert (test["noise_measured"], test["p_value"], test["conclusion"]) == (False, None, "not_computable")
    assert test["estimate_pct"] == 20.0


@pytest.mark.parametrize("generation", range(21))
def test_every_generation_of_the_fixed_and_the_sequential_design_decides_without_raising(generation):
    """Generations 0-20 (alpha down to 0.05 / 2^21): two-task suites with two runs (one degree of freedom), a
    candidate far cheaper, one far dearer and one identical; every document validates against the schema."""
    rng = np.random.default_rng(generation)
    suites = {
        "cheaper": {f"t{i}": ([1.0 + i, 4.0 + i], [0.1 * (1 + i), 0.3 * (4 + i)]) for i in range(2)},
        "dearer": {f"t{i}": ([1.0, 4.0], [40.0, 9.0]) for i in range(2)},
        "noisy": {
            f"t{i}": (list(np.exp(rng.normal(0, 1.5, 6))), list(np.exp(rng.normal(0, 1.5, 6)))) for i in range(3)
        },
        "free": {f"t{i}": ([1.0, 1.1, 0.9], [1e-9, 2e-9, 1e-9]) for i in range(2)},
    }
    sequential = run_design({"min": 2, "max": 6, "step": 2})
    for costs in suites.values():
        rows = rows_of(costs)
        fixed = document(rows, generation=generation)
        assert fixed["decisions"][0]["decision"] in ("promote", "keep_incumbent", "insufficient_evidence")
        looked = document(rows, generation=generation, design=sequential)
        assert looked["decisions"][0]["sequential"]["status"] in ("decided", "continue")


# ─── A capped session is a counted observation ──────────────────────────────


def capped_suite(capped: dict[tuple[str, int], float], *, saving: float = 0.15, tasks: int = 12) -> list[dict]:
    """A suite of ``tasks`` tasks × 5 runs; the candidate ``saving`` cheaper; ``capped`` (task, run) → the cap the
    candidate's session was stopped at (its row: session-cap-reached, unresolved)."""
    rng = np.random.default_rng(7)
    costs = {}
    for index in range(tasks):
        level = math.exp(rng.uniform(-1, 1))
        costs[f"t{index:02d}"] = (
            list(level * np.exp(rng.normal(0, 0.2, 5))),
            list(level * (1 - saving) * np.exp(rng.normal(0, 0.2, 5))),
        )
    fields = {}
    for (task, run), cap in capped.items():
        costs[task][1][run] = cap
        fields[(task, CAND, run)] = {"resolved": False, "error_kind": "session-cap-reached"}
    return rows_of(costs, fields)


def test_a_capped_session_counts_at_its_cap_and_as_unresolved():
    rows = capped_suite({("t02", 1): 6.0})
    result = decide(rows)
    # Counted, never excluded: the pair is decided on every run, the capped one at its cost and as a failure.
    assert result["decision"] != "insufficient_evidence"
    task = next(task for task in result["tasks"] if task["task"] == "t02")
    assert task["candidate_resolved"] == "4/5" and task["candidate_excluded_runs"] == 0
    assert result["tests"]["quality"]["candidate_resolved"] == 59
    uncapped = decide(capped_suite({}))
    assert result["tests"]["cost"]["estimate_pct"] < uncapped["tests"]["cost"]["estimate_pct"]


def test_a_candidate_whose_capped_runaways_make_it_dearer_is_not_promoted():
    """Cheaper on its usual sessions, but a fifth of its sessions run into the cap: at the cap it is dearer in total
    and resolves less, so it is kept; with the same sessions excluded instead it would have looked 15 % cheaper."""
    capped = {(f"t{index:02d}", run): 8.0 for index in range(12) for run in (0,)}
    result = decide(capped_suite(capped))
    assert result["tests"]["cost"]["estimate_pct"] < 0
    assert result["decision"] == "keep_incumbent"
    kept = [row for row in capped_suite(capped) if row.get("error_kind") != "session-cap-reached"]
    assert len(kept) == len(capped_suite({})) - 12


# ─── The spend test holds its level where the t alone would not ─────────────


def test_one_task_that_carries_the_spend_is_one_tasks_evidence():
    """Eleven cheap tasks barely change; the one that costs thirty times as much and is noisy happens to come out
    30 % cheaper. The spread between tasks is small and the t alone calls that certain; the task's own runs show how
    noisy it is, and swapping its arms alone gives as extreme a total: kept."""
    rng = np.random.default_rng(3)
    big = [1.0, 2.2, 0.5, 1.4, 0.7]
    costs = {"big": ([30 * value for value in big], [21 * value for value in (0.9, 2.0, 0.55, 1.3, 0.75)])}
    for index in range(11):
        noise = np.exp(rng.normal(0, 0.05, (2, 5)))
        costs[f"t{index:02d}"] = (list(noise[0]), list(noise[1]))
    cost = decide(rows_of(costs))["tests"]["cost"]
    cells = list(costs.values())
    ratios, weights, estimate = stats.cost_components(cells, "total_spend")
    spread_only = math.sqrt(stats.stats.tvar(ratios) * math.fsum(w * w for w in weights))
    assert float(stats.stats.t.sf(estimate / spread_only, 11)) < 0.0225  # what the t on the spread alone said
    assert cost["se_log"] > 2 * spread_only
    assert cost["p_value"] > 0.0225 and cost["conclusion"] != "cheaper"


def test_the_sign_flip_test_counts_the_flips_as_extreme_as_the_observed():
    """Against an independent enumeration: swap each subset of tasks' arms in the cells, recompute the cost test's
    statistic through ``cost_components`` and ``spend_variance``, count those at least as large."""
    rng = np.random.default_rng(11)
    cells = [
        (list(np.exp(rng.normal(level, 0.3, 3))), list(np.exp(rng.normal(level - 0.1, 0.3, 3))))
        for level in rng.uniform(-1, 1, 7)
    ]

    def statistic(suite):
        ratios, weights, estimate = stats.cost_components(suite, "total_spend")
        variance, _, _ = stats.spend_variance(ratios, weights, stats.run_noise(suite, "total_spend"))
        return estimate / math.sqrt(variance)

    observed = statistic(cells)
    reached = 0
    for swaps in itertools.product((False, True), repeat=len(cells)):
        flipped = [(cand, inc) if swap else (inc, cand) for swap, (inc, cand) in zip(swaps, cells, strict=True)]
        reached += statistic(flipped) >= observed - 1e-9
    ratios, weights, _ = stats.cost_components(cells, "total_spend")
    flip = stats.sign_flip_test(
        ratios, weights, objective="total_spend", alpha=0.0225, noise=stats.run_noise(cells, "total_spend")
    )
    assert flip["exact"] and flip["flips"] == 128 and flip["floor"] == pytest.approx(1 / 128)
    assert flip["p_value"] == pytest.approx(reached / 128)


def test_the_sign_flip_test_applies_from_the_suite_size_that_can_reach_alpha():
    """Its smallest p is 2^-K: five tasks cannot reach generation 0's 0.0225 (1/32), six can (1/64); seven are needed
    at generation 1's 0.01125. Below that the t decides alone, with at most K - 1 degrees of freedom."""
    for tasks, alpha, applies in ((5, 0.0225, False), (6, 0.0225, True), (6, 0.01125, False), (7, 0.01125, True)):
        cells = [([1.0 + i, 1.1 + i, 0.9 + i], [0.8 + i, 0.85 + i, 0.75 + i]) for i in range(tasks)]
        test = stats.cost_test(cells, alpha=alpha, floor_pct=5.0)
        assert test["sign_flip"]["applies"] is applies
        assert test["sign_flip"]["floor"] == pytest.approx(2.0**-tasks, rel=1e-5)
        if applies:
            assert test["p_value"] == max(test["t_p_value"], test["sign_flip"]["p_value"])
        else:
            assert test["p_value"] == test["t_p_value"] and test["df"] <= tasks - 1
    # Every task cheaper and no other flip as extreme: the floor itself.
    cells = [([1.0 + i, 1.1 + i, 0.9 + i], [0.8 + i, 0.85 + i, 0.75 + i]) for i in range(6)]
    assert stats.cost_test(cells, alpha=0.0225, floor_pct=5.0)["sign_flip"]["p_value"] == pytest.approx(1 / 64)


def test_a_large_suite_draws_its_flips_from_a_fixed_seed():
    rng = np.random.default_rng(5)
    cells = [
        (list(np.exp(rng.normal(level, 0.3, 3))), list(np.exp(rng.normal(level, 0.3, 3))))
        for level in rng.uniform(-1, 1, 30)
    ]
    first, again = (stats.cost_test(cells, alpha=0.01125, floor_pct=5.0) for _ in range(2))
    assert first == again
    flip = first["sign_flip"]
    assert not flip["exact"] and flip["flips"] >= 64 / 0.01125 and flip["applies"]
    assert flip["floor"] == pytest.approx(1 / (flip["flips"] + 1), rel=1e-5)


def test_the_within_margin_test_needs_both_tests_and_a_dearer_pair_is_not_within():
    rng = np.random.default_rng(9)
    levels = rng.uniform(-1, 1, 12)
    same = [(list(np.exp(rng.normal(v, 0.1, 6))), list(np.exp(rng.normal(v, 0.1, 6)))) for v in levels]
    dearer = [(inc, [1.25 * value for value in cand]) for inc, cand in same]
    shown = stats.cost_test(same, alpha=0.0225, floor_pct=5.0, margin_pct=10.0)
    assert shown["margin_pct"] == 10.0 and shown["p_within_margin"] <= 0.0225
    assert stats.cost_within_pct(shown, 10.0) == shown["p_within_margin"]
    assert stats.cost_test(dearer, alpha=0.0225, floor_pct=5.0, margin_pct=10.0)["p_within_margin"] > 0.5


def test_the_advice_after_a_run_with_capped_sessions_does_not_ask_to_rerun_them():
    """Capped sessions are counted outcomes, not excluded runs: the closing advice never tells the user to rerun
    them (only the run's own budget, budget-exhausted rows, is a reason to run the same command again)."""
    from skillbench.experiment.configcheck import next_step

    capped = {(f"t{index:02d}", 0): 8.0 for index in range(12)}
    decision = decide(capped_suite(capped))
    config = {"gate": {"min_runs": 3}, "runs": 5}
    advice = next_step(config, 12, [decision])
    assert "run the same command again" not in advice and "excluded" not in advice
