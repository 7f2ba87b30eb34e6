"""The gate's statistics against SciPy and hand-computed references."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats
from skillbench.decision import stats as gate_stats


@pytest.mark.parametrize(
    "table",
    [(9, 9, 9, 9), (4, 5, 3, 5), (0, 6, 2, 6), (7, 10, 10, 10), (12, 20, 5, 20), (3, 3, 0, 4)],
)
@pytest.mark.parametrize("difference", [-0.16, -0.1, 0.0, 0.05])
def test_restricted_rates_maximise_the_likelihood_under_the_constraint(table, difference):
    x0, n0, x1, n1 = table

    def negative_loglik(q: float) -> float:
        r = q + difference
        terms = [(x0, q), (n0 - x0, 1 - q), (x1, r), (n1 - x1, 1 - r)]
        return -sum(count * math.log(max(p, 1e-300)) for count, p in terms if count)

    low, high = max(0.0, -difference), min(1.0, 1.0 - difference)
    reference = optimize.minimize_scalar(
        negative_loglik, bounds=(low, high), method="bounded", options={"xatol": 1e-10}
    )
    q, r = gate_stats.restricted_rates(x0, n0, x1, n1, difference)
    assert r == pytest.approx(q + difference)
    assert negative_loglik(q) <= negative_loglik(reference.x) + 1e-7


def test_all_resolved_runs_give_the_non_inferiority_p_of_their_count():
    """n of n in both arms, margin m: the restricted rates are 1 and 1 - m, so z = m / sqrt(m (1 - m) / n)."""
    for runs, margin in ((9, 0.16), (36, 0.10), (60, 0.10)):
        result = gate_stats.quality_test(
            [(runs, runs, runs, runs)], alpha=0.05, margin_pct=100 * margin, better_alpha=0.005
        )
        expected = stats.norm.sf(margin / math.sqrt(margin * (1 - margin) / runs))
        assert result["p_noninferiority"] == pytest.approx(expected, rel=1e-4)
        assert (result["p_worse"], result["p_better"]) == (1.0, 1.0)
        half = stats.norm.isf(0.05) * math.sqrt(margin * (1 - margin) / runs)
        assert result["ci_low_pct"] == round(-100 * half, 1)


def test_resolution_drops_are_binomial_tails_against_the_larger_reference_rate():
    # Suite: 6 tasks × 5 runs, one candidate task 3/5, every other run resolved: no failure in the other 55 runs.
    tables = [(5, 5, 3, 5)] + [(5, 5, 5, 5)] * 5
    drops = gate_stats.resolution_drops(tables)
    assert drops[0] == pytest.approx(stats.binom.sf(1, 5, 0.5 / 56), rel=1e-5)
    assert drops[1:] == [1.0] * 5
    # A task the incumbent itself fails half of the time is judged against that rate.
    hard = gate_stats.resolution_drops([(2, 4, 1, 4), (4, 4, 4, 4)])
    assert hard[0] == pytest.approx(stats.binom.sf(2, 4, 0.5), rel=1e-5)
    # Where the other runs fail one in five, the same two failures are no drop.
    flaky = gate_stats.resolution_drops([(5, 5, 3, 5)] + [(4, 5, 4, 5)] * 5)
    assert flaky[0] == pytest.approx(stats.binom.sf(1, 5, 10.5 / 56), rel=1e-5) and flaky[0] > 0.2


def test_holm_adjusts_step_down_and_keeps_the_order():
    assert gate_stats.holm([0.01, 0.04, 0.03, 0.5]) == [0.04, 0.09, 0.09, 0.5]
    assert gate_stats.holm([]) == []


def test_the_known_variance_bound_is_the_normal_power_and_the_simulated_power_stays_below_it():
    """cost_power simulates cost_test itself (run noise estimated from the runs, the sign-flip test near its
    floor); a z-test that knew the variance is its ceiling, up to the simulation's own error."""
    for tasks, runs, shared in ((10, 5, 0.0), (20, 3, 0.2), (6, 10, 0.1), (34, 3, 0.0)):
        se = math.sqrt(2 * (shared**2 + 0.09 / runs) / tasks)
        bound = gate_stats.known_variance_power(
            saving_pct=15.0, tasks=tasks, runs=runs, run_variance=0.09, shared_sd=shared, alpha=0.0225
        )
        assert bound == pytest.approx(stats.norm.sf(stats.norm.isf(0.0225) - -math.log(0.85) / se), abs=1e-9)
        power = gate_stats.cost_power(
            saving_pct=15.0, tasks=tasks, runs=runs, run_variance=0.09, shared_sd=shared, alpha=0.0225
        )
        assert 0.0 < power <= bound + 0.03
        # The same design always gets the same power; more runs, no less.
        again = gate_stats.cost_power(
            saving_pct=15.0, tasks=tasks, runs=runs, run_variance=0.09, shared_sd=shared, alpha=0.0225
        )
        more = gate_stats.cost_power(
            saving_pct=15.0, tasks=tasks, runs=runs + 4, run_variance=0.09, shared_sd=shared, alpha=0.0225
        )
        assert again == power <= more + 0.01


def test_cost_power_at_a_late_generations_alpha_is_not_lost_to_too_few_flips():
    """At generation 5's cost alpha (0.05/64 × 0.9) the gate's sign-flip test can still reject; a power simulation
    with 1,024 drawn flips could not (no share of them is that small) and read 0 for a design that has power."""
    alpha = 0.05 / 64 * 0.9
    assert alpha < 1 / (gate_stats.POWER_FLIPS + 1)
    power = gate_stats.cost_power(
        saving_pct=15.0, tasks=34, runs=3, run_variance=0.094, shared_sd=0.0, alpha=alpha, spend_efficiency=0.76
    )
    earlier = gate_stats.cost_power(
        saving_pct=15.0, tasks=34, runs=3, run_variance=0.094, shared_sd=0.0, alpha=alpha * 2, spend_efficiency=0.76
    )
    assert 0.2 < power < earlier


def test_cost_power_of_an_identical_candidate_is_at_most_alpha():
    for tasks, runs in ((12, 3), (6, 10)):
        null = gate_stats.cost_power(
            saving_pct=0.0, tasks=tasks, runs=runs, run_variance=0.09, shared_sd=0.1, alpha=0.0225
        )
        assert null <= 0.0225 + 2 * math.sqrt(0.0225 / gate_stats.POWER_DRAWS)


def test_six_tasks_pay_for_the_sign_flip_tests_floor_and_five_do_not_need_it():
    """At generation 0's cost alpha (0.0225) six tasks can reach the sign-flip test only when every task is cheaper
    (its floor 1/64): the same design has less power than the t alone would give it."""
    common = {"saving_pct": 15.0, "runs": 10, "run_variance": 0.09, "shared_sd": 0.0, "alpha": 0.0225}
    six = gate_stats.cost_power(tasks=6, **common)
    assert six < gate_stats.known_variance_power(tasks=6, **common) - 0.05


def test_shared_cell_effects_make_more_tasks_beat_more_runs():
    common = {"saving_pct": 15.0, "run_variance": 0.09, "shared_sd": 0.2, "alpha": 0.0225, "floor_pct": 5.0}
    assert gate_stats.cheapest_design(**common, spend_efficiency=1.0, tasks=6, min_runs=3) is None
    design = gate_stats.cheapest_design(**common, spend_efficiency=1.0, min_runs=3)
    assert design is not None and design["runs"] == 3 and design["power"] >= 0.8
    fewer = gate_stats.cost_power(
        saving_pct=15.0,
        tasks=design["tasks"] - 1,
        runs=3,
        run_variance=0.09,
        shared_sd=0.2,
        alpha=0.0225,
        floor_pct=5.0,
    )
    assert fewer < 0.8


def test_a_tasks_own_saving_and_its_welch_interval():
    incumbent, candidate = [1.0, 1.2, 0.8], [0.8, 0.9, 0.7]
    result = gate_stats.task_saving(incumbent, candidate, objective="per_task", alpha=0.05)
    logs = [math.log(v) for v in incumbent], [math.log(v) for v in candidate]
    reference = stats.ttest_ind(*logs, equal_var=False)
    estimate = sum(logs[0]) / 3 - sum(logs[1]) / 3
    se = estimate / reference.statistic
    half = stats.t.isf(0.05, reference.df) * se
    assert result["saving_pct"] == round(100 * (1 - math.exp(-estimate)), 1)
    assert result["ci_low_pct"] == round(100 * (1 - math.exp(-(estimate - half))), 1)
    spend = gate_stats.task_saving(incumbent, candidate, objective="total_spend", alpha=0.05)
    assert spend["saving_pct"] == 20.0


def test_shown_within_a_cost_margin_is_a_shifted_t_test():
    cells = [([1.0, 1.1, 0.9], [1.02 * f, 1.1 * f, 0.95 * f]) for f in (1.0, 1.04, 0.97, 1.02, 0.99, 1.01)]
    test = gate_stats.cost_test(cells, alpha=0.0225, floor_pct=5.0)
    estimate = -math.log(1 - test["estimate_pct"] / 100)
    expected = stats.t.sf((estimate + math.log(1.1)) / test["se_log"], test["df"])
    assert gate_stats.cost_within_pct(test, 10.0) == pytest.approx(expected, rel=1e-3)


def test_the_workflows_parse_imports_no_scipy_and_a_test_imports_it_on_first_use():
    """Importing SciPy is most of a parse's time; the parse only reads the design, so SciPy waits for a test."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from skillbench import preflight\n"
        "from skillbench.decision import gate, promotion, stats\n"
        "print('scipy' in sys.modules)\n"
        "print(stats.holm([0.01, 0.04]), stats.sign_test([1.0, 2.0, -1.0])['p_value'])\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    scripts = Path(__file__).resolve().parents[2] / "scripts"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(scripts)}
    )
    before, values, after = done.stdout.splitlines()
    assert (before, after) == ("False", "True")
    assert values == f"{gate_stats.holm([0.01, 0.04])} {gate_stats.sign_test([1.0, 2.0, -1.0])['p_value']}"
