"""Figures for the reports: what each plot shows (pure functions of rows, gate and summary documents), and
the matplotlib rendering of it to deterministic SVG.

Owns the figure data — cost against resolution per arm, the paired candidate-vs-incumbent saving per
task with its interval and the estimate of the test the gate decided on (a forest plot), the chain of
generations with each decision's tested estimate, spend and turns per session role,
and the timeline of cells on their worker slots — and how each one is drawn. The ``*_data`` functions
take plain values and return plain values (unit-tested); the ``plot_*`` functions draw that data; the
``make_*`` functions are the rule steps (read and validate inputs, write the SVG atomically).
"""

from __future__ import annotations

import io
import random
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from skillbench.base import artifacts
from skillbench.base.records import ResultRow
from skillbench.decision.aggregate import is_valid
from skillbench.experiment.arms import incumbent_of

DECISION_COLOURS = {"promote": "#1a7f37", "keep_incumbent": "#8c959f", "insufficient_evidence": "#bf8700"}
ARM_COLOURS = ["#0969da", "#cf222e", "#8250df", "#1a7f37", "#bf8700", "#57606a", "#e16f24", "#1b7c83"]
# The gate's two reference lines, drawn alike in every figure that shows them.
THRESHOLD_LINE_STYLE = {"color": "#1a7f37", "linestyle": "--", "linewidth": 1}
REGRESSION_LINE_STYLE = {"color": "#cf222e", "linestyle": ":", "linewidth": 1}


# ─── Figure data (pure) ──────────────────────────────────────────────────────


def _ordered(preferred: Iterable[str], present: Iterable[str]) -> list[str]:
    present = list(dict.fromkeys(present))
    named = [item for item in dict.fromkeys(preferred) if item in present]
    return named + [item for item in present if item not in named]


def cost_resolution_data(
    rows: Sequence[ResultRow], task_order: list[str], arm_order: list[str]
) -> list[dict[str, Any]]:
    """Per task (a facet), per arm: every run's cost and outcome, the median cost over valid runs, the resolved
    count and the cost per resolved run (all valid runs' cost / resolved runs; None when nothing resolved or
    a cost was not measured).

    Runs with an unmeasured cost are kept in the counts and listed with ``cost_usd`` None (not drawn)."""
    tasks = _ordered(task_order, (row["task"] for row in rows))
    facets = []
    for task in tasks:
        task_rows = [row for row in rows if row["task"] == task]
        arms = []
        for arm in _ordered(arm_order, (row["arm"] for row in task_rows)):
            group = sorted((row for row in task_rows if row["arm"] == arm), key=lambda row: row["run"])
            arms.append(_arm_costs(arm, group))
        facets.append({"task": task, "arms": arms})
    return facets


def _arm_costs(arm: str, group: list[ResultRow]) -> dict[str, Any]:
    """One arm's runs of one task (in run order) as the cost/resolution figure shows them."""
    valid = [row for row in group if is_valid(row)]
    costs = [row["cost_usd"] for row in valid if row["cost_usd"] is not None]
    measured = len(costs) == len(valid) and bool(costs)
    resolved = sum(1 for row in valid if row["resolved"])
    return {
        "arm": arm,
        "runs": [
            {
                "run": row["run"],
                "cost_usd": row["cost_usd"],
                "resolved": bool(row["resolved"]),
                "excluded": not is_valid(row),
            }
            for row in group
        ],
        "median_cost_usd": statistics.median(costs) if measured else None,
        "resolved": resolved,
        "valid_runs": len(valid),
        "cost_per_resolved_usd": sum(costs) / resolved if measured and resolved else None,
    }


def _improvement(incumbent: list[float], candidate: list[float]) -> float | None:
    base = statistics.median(incumbent)
    if base == 0:
        return None
    return 100 * (base - statistics.median(candidate)) / base


def paired_interval(
    incumbent: list[float | None],
    candidate: list[float | None],
    *,
    confidence: float,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a task's improvement % (median incumbent vs median candidate), resampling
    the paired runs; None with fewer than two fully measured pairs."""
    pairs = [(a, b) for a, b in zip(incumbent, candidate, strict=True) if a is not None and b is not None]
    if len(pairs) < 2:
        return None
    generator = random.Random(seed)
    values = []
    for _ in range(resamples):
        sample = [pairs[generator.randrange(len(pairs))] for _ in pairs]
        value = _improvement([a for a, _ in sample], [b for _, b in sample])
        if value is not None:
            values.append(value)
    if not values:
        return None
    values.sort()
    tail = (1 - confidence) / 2
    low = values[int(tail * (len(values) - 1))]
    high = values[int(round((1 - tail) * (len(values) - 1)))]
    return round(low, 1), round(high, 1)


def decided_estimate(decision: dict[str, Any]) -> dict[str, Any]:
    """The estimate, interval and confidence of the test a decision was made on, and what it is called: the cost
    test (total spend or per-task geometric mean, its 1 - 2 alpha interval) for the noise-aware rule, the median
    improvement over gated tasks with its bootstrap interval for the upstream rule."""
    if decision["rule"] == "noise_aware":
        cost = decision["tests"]["cost"]
        interval = None
        if cost["ci_low_pct"] is not None and cost["ci_high_pct"] is not None:
            interval = (cost["ci_low_pct"], cost["ci_high_pct"])
        name = "total spend" if cost["objective"] == "total_spend" else "per-task geometric mean"
        return {
            "estimate_pct": cost["estimate_pct"],
            "interval": interval,
            "confidence": cost["confidence"],
            "label": name,
        }
    bootstrap = decision["statistics"]["bootstrap"]
    interval = None
    if bootstrap["ci_low_pct"] is not None and bootstrap["ci_high_pct"] is not None:
        interval = (bootstrap["ci_low_pct"], bootstrap["ci_high_pct"])
    return {
        "estimate_pct": decision["median_improvement_pct"],
        "interval": interval,
        "confidence": bootstrap["confidence"],
        "label": "median over gated tasks",
    }


def _task_interval(row: dict[str, Any], decision: dict[str, Any], confidence: float) -> tuple[float, float] | None:
    """A task's own interval: the one the gate stored (noise-aware: the task's saving on the objective's scale), else
    a bootstrap over the paired runs."""
    checks = row.get("checks") or {}
    if decision["rule"] == "noise_aware" and checks.get("saving_ci_low_pct") is not None:
        return checks["saving_ci_low_pct"], checks["saving_ci_high_pct"]
    if row.get("ci_low_pct") is not None and row.get("ci_high_pct") is not None:
        return row["ci_low_pct"], row["ci_high_pct"]
    if row["paired"]:
        return paired_interval(
            row["paired"]["incumbent_values"],
            row["paired"]["candidate_values"],
            confidence=confidence,
            seed=decision["statistics"]["bootstrap"]["seed"],
        )
    return None


def forest_data(promotion: dict[str, Any], candidate_arm: str) -> dict[str, Any]:
    """The forest plot of one candidate pair: per task its own saving with an interval, the estimate and interval of
    the test the decision was made on (``decided_estimate``), the promotion threshold and the regression limit.

    Noise-aware decisions draw each task's saving on the objective's scale with the interval of its own runs
    (stored by the gate), and below them the cost test's estimate and 1 - 2 alpha interval; upstream decisions
    draw each task's median improvement with a bootstrap interval over its paired runs, and the median over
    gated tasks with the gate's bootstrap interval."""
    decision = next((d for d in promotion["decisions"] if d["candidate_arm"] == candidate_arm), None)
    if decision is None:
        raise ValueError(
            f"promotion.json has no decision for {candidate_arm} "
            f"(decisions: {[d['candidate_arm'] for d in promotion['decisions']]})"
        )
    decided = decided_estimate(decision)
    noise_aware = decision["rule"] == "noise_aware"
    tasks = []
    for row in decision["tasks"]:
        checks = row.get("checks") or {}
        tasks.append(
            {
                "task": row["task"],
                "improvement_pct": checks.get("saving_pct") if noise_aware else row["improvement_pct"],
                "interval": _task_interval(row, decision, decided["confidence"]),
                "gated": row["gated"],
                "label": f"{row['task']}  ({row['incumbent_resolved']} → {row['candidate_resolved']} resolved)",
            }
        )
    return {
        "candidate_arm": decision["candidate_arm"],
        "incumbent_arm": decision["incumbent_arm"],
        "decision": decision["decision"],
        "metric": decision["metric"],
        "confidence": decided["confidence"],
        "tasks": tasks,
        "pooled": {
            "improvement_pct": decided["estimate_pct"],
            "interval": decided["interval"],
            "label": decided["label"],
        },
        "threshold_pct": promotion["policy"]["min_improvement_pct"],
        "regression_limit_pct": -promotion["policy"]["max_task_regression_pct"],
    }


def generation_chain_data(summary: dict[str, Any], promotions: list[dict[str, Any]]) -> dict[str, Any]:
    """One point per (generation, candidate arm): its decision and the estimate and interval of the test it was made
    on (``decided_estimate``); plus the candidate digest per generation and the promotion threshold."""
    by_generation = dict(zip((g["generation"] for g in summary["generations"]), promotions, strict=True))
    points, generations = [], []
    threshold = None
    for generation in summary["generations"]:
        promotion = by_generation[generation["generation"]]
        threshold = promotion["policy"]["min_improvement_pct"]
        decided = {d["candidate_arm"]: decided_estimate(d) for d in promotion["decisions"]}
        generations.append(
            {
                "generation": generation["generation"],
                "digest": generation["candidate_overlay_digest"][:8],
                "promoted": generation["promoted"],
                "origin": generation["candidate_origin"],
            }
        )
        for decision in generation["decisions"]:
            estimate = decided.get(decision["candidate_arm"], {"estimate_pct": None, "interval": None, "label": ""})
            points.append(
                {
                    "generation": generation["generation"],
                    "candidate_arm": decision["candidate_arm"],
                    "decision": decision["decision"],
                    "improvement_pct": estimate["estimate_pct"],
                    "interval": estimate["interval"],
                    "label": estimate["label"],
                }
            )
    return {
        "experiment": summary["experiment"],
        "outcome": summary["outcome"],
        "generations": generations,
        "points": points,
        "threshold_pct": threshold,
    }


def spend_data(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per session role (in first-appearance order): sessions, total measured cost, each session's cost and
    turns, and how many costs were not measured. ``sessions`` holds ``{role, cost_usd, num_turns}``."""
    roles: dict[str, dict[str, Any]] = {}
    for session in sessions:
        entry = roles.setdefault(
            session["role"],
            {"role": session["role"], "sessions": 0, "cost_usd": 0.0, "costs": [], "turns": [], "unmeasured": 0},
        )
        entry["sessions"] += 1
        if session["cost_usd"] is None:
            entry["unmeasured"] += 1
        else:
            entry["costs"].append(session["cost_usd"])
            entry["cost_usd"] = round(entry["cost_usd"] + session["cost_usd"], 6)
        if session["num_turns"] is not None:
            entry["turns"].append(session["num_turns"])
    return list(roles.values())


def session_role(arm: str, role: str) -> str:
    """Candidate sessions are their own role, so the candidate's spend is never mixed into the incumbent's."""
    from skillbench.experiment.arms import is_candidate

    return f"{role} (candidate)" if is_candidate(arm) else role


def _seconds(moment: str, origin: datetime) -> float:
    return (datetime.fromisoformat(moment.replace("Z", "+00:00")) - origin).total_seconds()


def timeline_data(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Cells on worker slots: each cell ``{label, arm, started_at, finished_at, sessions: [{role, started_at,
    finished_at}]}`` gets seconds from the earliest start and the lowest slot free at its start (the slots
    the session cap let run side by side), so overlapping cells never share a slot."""
    if not cells:
        return {"origin": None, "slots": 0, "cells": []}
    origin = min(datetime.fromisoformat(cell["started_at"].replace("Z", "+00:00")) for cell in cells)
    placed: list[dict[str, Any]] = []
    slot_ends: list[float] = []
    for cell in sorted(cells, key=lambda c: (c["started_at"], c["finished_at"], c["label"])):
        start, end = _seconds(cell["started_at"], origin), _seconds(cell["finished_at"], origin)
        slot = next((index for index, free_at in enumerate(slot_ends) if free_at <= start), len(slot_ends))
        if slot == len(slot_ends):
            slot_ends.append(end)
        else:
            slot_ends[slot] = end
        placed.append(
            {
                "label": cell["label"],
                "arm": cell["arm"],
                "slot": slot,
                "start_s": round(start, 3),
                "end_s": round(end, 3),
                "sessions": [
                    {
                        "role": s["role"],
                        "start_s": round(_seconds(s["started_at"], origin), 3),
                        "end_s": round(_seconds(s["finished_at"], origin), 3),
                    }
                    for s in cell.get("sessions", [])
                ],
            }
        )
    return {"origin": artifacts.utc_timestamp(origin), "slots": len(slot_ends), "cells": placed}


# ─── Rendering ───────────────────────────────────────────────────────────────


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Reruns must write identical bytes: fixed ids in the SVG, no creation date.
    plt.rcParams.update(
        {
            "svg.hashsalt": "skillbench",
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 10,
        }
    )
    return plt


def _svg(figure: Any) -> str:
    plt = _pyplot()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _lighter(colour: str, share: float = 0.45) -> str:
    """``colour`` (``#rrggbb``) mixed with ``share`` white."""
    channels = [int(colour[index : index + 2], 16) for index in (1, 3, 5)]
    return "#" + "".join(f"{round(value + (255 - value) * share):02x}" for value in channels)


def arm_colours(arm_order: Iterable[str]) -> dict[str, str]:
    """One colour per arm, the same in every figure of an experiment: each incumbent arm's from its place in the
    experiment's arm order (``arm_order``: incumbents, and candidates if any, e.g. a generation's order), and its
    candidate arm a lighter shade of it, so a pair reads as a pair. Only the incumbents' order matters."""
    from skillbench.experiment.arms import candidate_of, incumbent_of

    incumbents = list(dict.fromkeys(incumbent_of(arm) for arm in arm_order))
    colours = {}
    for index, arm in enumerate(incumbents):
        colour = ARM_COLOURS[index % len(ARM_COLOURS)]
        colours[arm] = colour
        colours[candidate_of(arm)] = _lighter(colour)
    return colours


def _colour_of(colours: dict[str, str], arm: str) -> str:
    return colours.get(arm, "#57606a")


def plot_cost_resolution(facets: list[dict[str, Any]], *, title: str, colours: dict[str, str]) -> str:
    plt = _pyplot()
    from matplotlib.lines import Line2D

    sizes = [max(len(facet["arms"]), 1) for facet in facets] or [1]
    figure, axes = plt.subplots(
        len(sizes),
        1,
        figsize=(8, 0.9 + 0.42 * sum(sizes) + 0.35 * len(sizes)),
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": sizes},
    )
    for axis, facet in zip(axes[:, 0], facets, strict=False):
        ys = list(range(len(facet["arms"])))[::-1]
        labels = []
        for y, arm in zip(ys, facet["arms"], strict=True):
            colour = _colour_of(colours, arm["arm"])
            drawn = [run for run in arm["runs"] if run["cost_usd"] is not None]
            offsets = [(i - (len(drawn) - 1) / 2) * 0.12 for i in range(len(drawn))]
            for offset, run in zip(offsets, drawn, strict=True):
                if run["excluded"]:
                    axis.scatter(run["cost_usd"], y + offset, marker="x", color="#6e7781", s=26, zorder=3)
                else:
                    axis.scatter(
                        run["cost_usd"],
                        y + offset,
                        s=30,
                        zorder=3,
                        edgecolors=colour,
                        linewidths=1.3,
                        facecolors=colour if run["resolved"] else "white",
                    )
            if arm["median_cost_usd"] is not None:
                axis.vlines(arm["median_cost_usd"], y - 0.38, y + 0.38, colors=colour, linewidth=2.2, zorder=2)
            per_resolved = arm["cost_per_resolved_usd"]
            per_run = "n/a" if per_resolved is None else f"${per_resolved:.3f}"
            labels.append(f"{arm['arm']}  {arm['resolved']}/{arm['valid_runs']} resolved, {per_run} per resolved run")
        axis.set_yticks(ys, labels, fontsize=8)
        axis.set_ylim(-0.6, len(facet["arms"]) - 0.4)
        axis.set_title(facet["task"], loc="left", fontsize=9.5, fontweight="bold")
        axis.grid(axis="x", color="#d0d7de", linewidth=0.6)
        axis.set_axisbelow(True)
    axes[-1, 0].set_xlabel("cost per run (USD) — left is cheaper")
    handles = [
        Line2D([], [], marker="o", linestyle="", color="#57606a", label="resolved run"),
        Line2D([], [], marker="o", linestyle="", markerfacecolor="white", color="#57606a", label="unresolved run"),
        Line2D([], [], marker="x", linestyle="", color="#6e7781", label="excluded run"),
        Line2D(
            [],
            [],
            marker="|",
            markersize=12,
            markeredgewidth=2.2,
            linestyle="",
            color="#57606a",
            label="median of valid runs",
        ),
    ]
    axes[0, 0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.12), ncol=4, frameon=False, fontsize=8)
    figure.suptitle(title, fontsize=11, x=0.02, ha="left")
    figure.tight_layout()
    return _svg(figure)


def plot_forest(data: dict[str, Any]) -> str:
    plt = _pyplot()
    tasks = data["tasks"]
    height = 1.4 + 0.42 * (len(tasks) + 1)
    figure, axis = plt.subplots(figsize=(7.5, height))
    colour = DECISION_COLOURS.get(data["decision"], "#57606a")
    rows = list(range(len(tasks), 0, -1))
    for y, task in zip(rows, tasks, strict=True):
        tone = "#24292f" if task["gated"] else "#8c959f"
        if task["interval"] is not None:
            axis.hlines(y, task["interval"][0], task["interval"][1], colors=tone, linewidth=1.6)
        if task["improvement_pct"] is not None:
            axis.scatter(
                task["improvement_pct"],
                y,
                marker="s",
                s=40,
                zorder=3,
                edgecolors=tone,
                color=tone if task["gated"] else "white",
            )
    pooled = data["pooled"]
    if pooled["interval"] is not None:
        axis.hlines(0, pooled["interval"][0], pooled["interval"][1], colors=colour, linewidth=2.4)
    if pooled["improvement_pct"] is not None:
        axis.scatter(pooled["improvement_pct"], 0, marker="D", s=70, zorder=3, color=colour)
    axis.axvline(0, color="#57606a", linewidth=0.8)
    threshold, limit = data["threshold_pct"], data["regression_limit_pct"]
    axis.axvline(threshold, **THRESHOLD_LINE_STYLE, label=f"promotion threshold {threshold:g}%")
    axis.axvline(limit, **REGRESSION_LINE_STYLE, label=f"per-task regression limit {limit:g}%")
    labels = [task["label"] + ("" if task["gated"] else "  [not gated]") for task in tasks]
    axis.set_yticks([*rows, 0], [*labels, f"{data['pooled']['label']} (the gate's test): {data['decision']}"])
    axis.set_ylim(-0.8, len(tasks) + 0.8)
    axis.set_xlabel(
        f"{data['metric']} saving of {data['candidate_arm']} over {data['incumbent_arm']} (%)"
        f" — right is better; bars: {data['confidence']:.0%} intervals"
    )
    axis.grid(axis="x", color="#d0d7de", linewidth=0.6)
    axis.set_axisbelow(True)
    axis.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=8)
    figure.tight_layout()
    return _svg(figure)


def plot_generations(data: dict[str, Any]) -> str:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7.5, 3.4))
    arms = list(dict.fromkeys(point["candidate_arm"] for point in data["points"]))
    width = 0.6 / max(len(arms), 1)
    for point in data["points"]:
        x = point["generation"] + (arms.index(point["candidate_arm"]) - (len(arms) - 1) / 2) * width
        colour = DECISION_COLOURS.get(point["decision"], "#57606a")
        if point["interval"] is not None:
            axis.vlines(x, point["interval"][0], point["interval"][1], colors=colour, linewidth=1.6)
        if point["improvement_pct"] is not None:
            axis.scatter(
                x,
                point["improvement_pct"],
                s=48,
                zorder=3,
                color=colour,
                marker="o" if point["decision"] == "promote" else "s",
            )
            axis.annotate(
                incumbent_of(point["candidate_arm"]),
                (x, point["improvement_pct"]),
                textcoords="offset points",
                xytext=(5, 3),
                fontsize=7,
                color="#57606a",
            )
    if data["threshold_pct"] is not None:
        axis.axhline(
            data["threshold_pct"], **THRESHOLD_LINE_STYLE, label=f"promotion threshold {data['threshold_pct']:g}%"
        )
    axis.axhline(0, color="#57606a", linewidth=0.8)
    ticks = [g["generation"] for g in data["generations"]]
    axis.set_xticks(
        ticks,
        [
            f"gen {g['generation']}\n{g['digest']}" + ("\npromoted" if g["promoted"] else "")
            for g in data["generations"]
        ],
    )
    axis.set_xlim(min(ticks, default=0) - 0.6, max(ticks, default=0) + 0.6)
    labels = sorted({point["label"] for point in data["points"] if point["label"]})
    axis.set_ylabel(f"saving the gate tested (%): {', '.join(labels) or 'n/a'}", fontsize=8)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", linestyle="", color=DECISION_COLOURS["promote"], label="promote"),
        Line2D([], [], marker="s", linestyle="", color=DECISION_COLOURS["keep_incumbent"], label="keep incumbent"),
        Line2D(
            [],
            [],
            marker="s",
            linestyle="",
            color=DECISION_COLOURS["insufficient_evidence"],
            label="insufficient evidence",
        ),
    ]
    if data["threshold_pct"] is not None:
        handles.append(Line2D([], [], color="#1a7f37", linestyle="--", label=f"threshold {data['threshold_pct']:g}%"))
    axis.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
    axis.grid(axis="y", color="#d0d7de", linewidth=0.6)
    axis.set_title(f"Generations of {data['experiment']}: {data['outcome'].replace('_', ' ')}")
    figure.tight_layout()
    return _svg(figure)


def plot_spend(roles: list[dict[str, Any]], *, title: str) -> str:
    plt = _pyplot()
    figure, (cost_axis, turns_axis) = plt.subplots(1, 2, figsize=(8.5, 0.8 + 0.45 * max(len(roles), 2)))
    names = [role["role"] for role in roles]
    ys = list(range(len(roles)))[::-1]
    cost_axis.barh(ys, [role["cost_usd"] for role in roles], color="#0969da", height=0.6)
    for y, role in zip(ys, roles, strict=True):
        note = f" ${role['cost_usd']:.2f} · {role['sessions']} sessions"
        if role["unmeasured"]:
            note += f" ({role['unmeasured']} unmeasured)"
        cost_axis.annotate(note, (role["cost_usd"], y), va="center", fontsize=7.5, color="#24292f")
    cost_axis.set_yticks(ys, names)
    cost_axis.set_xlabel("total cost (USD)")
    cost_axis.set_xlim(0, max((role["cost_usd"] for role in roles), default=1) * 1.6 or 1)
    cost_axis.set_title("where the money went")
    for y, role in zip(ys, roles, strict=True):
        if role["turns"]:
            turns_axis.boxplot(
                [role["turns"]],
                positions=[y],
                vert=False,
                widths=0.5,
                showfliers=False,
                medianprops={"color": "#cf222e"},
            )
            turns_axis.scatter(role["turns"], [y] * len(role["turns"]), s=10, color="#24292f", alpha=0.6, zorder=3)
    turns_axis.set_yticks(ys, names)
    turns_axis.set_xlabel("turns per session")
    turns_axis.set_title("turns per session by role")
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return _svg(figure)


def plot_timeline(data: dict[str, Any], *, title: str, colours: dict[str, str]) -> str:
    plt = _pyplot()
    slots = max(data["slots"], 1)
    figure, axis = plt.subplots(figsize=(9, 1.2 + 0.42 * slots))
    order = list(colours)
    present = {cell["arm"] for cell in data["cells"]}
    arms = sorted(present, key=lambda arm: (order.index(arm) if arm in order else len(order), arm))
    for cell in data["cells"]:
        colour = _colour_of(colours, cell["arm"])
        axis.broken_barh(
            [(cell["start_s"], max(cell["end_s"] - cell["start_s"], 0.01))],
            (cell["slot"] - 0.35, 0.7),
            facecolors=colour,
            alpha=0.25,
            edgecolor=colour,
            linewidth=0.6,
        )
        for session in cell["sessions"]:
            axis.broken_barh(
                [(session["start_s"], max(session["end_s"] - session["start_s"], 0.01))],
                (cell["slot"] - 0.2, 0.4),
                facecolors=colour,
            )
    axis.set_yticks(range(slots), [f"slot {slot + 1}" for slot in range(slots)])
    axis.invert_yaxis()
    axis.set_xlabel(
        f"seconds since {data['origin']} (light: cell, dark: its agent sessions)"
        if data["origin"]
        else "no cell has finished"
    )
    from matplotlib.patches import Patch

    axis.legend(
        handles=[Patch(color=_colour_of(colours, arm), label=arm) for arm in arms],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        frameon=False,
        fontsize=8,
    )
    axis.set_title(title)
    figure.tight_layout()
    return _svg(figure)


# ─── Rule steps (I/O edge) ───────────────────────────────────────────────────
