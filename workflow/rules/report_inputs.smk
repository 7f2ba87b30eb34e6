# Input functions of the figure and page rules (report.smk), the run plan that progress.json is computed
# against (written when a run starts), and the few lines printed when a run ends.
import sys
from datetime import UTC, datetime


def get_run_results(wildcards):
    """The rows of the whole run: the sweep's and each generation's (the figures read the cell records behind
    them; naming thousands of records as inputs would only lengthen Snakemake's job listing)."""
    return [sb_layout.rows(RESULTS, None)] + [sb_layout.rows(RESULTS, gen) for gen in generation_chain()]


def get_proposer_sessions(wildcards):
    return [
        sb_layout.proposer_session(RESULTS, gen) for gen in generation_chain() if not (gen == 0 and INITIAL_OVERLAY)
    ]


def get_chain_promotions(wildcards):
    return [sb_layout.promotion(RESULTS, gen) for gen in generation_chain()]


def get_run_figures(wildcards):
    figures = [sb_layout.run_figure(RESULTS, "generations.svg")] if GENERATIONS else []
    return figures + [sb_layout.run_figure(RESULTS, "spend.svg"), sb_layout.run_figure(RESULTS, "timeline.svg")]


def get_generation_figures(wildcards):
    return [sb_layout.stage_figure(RESULTS, wildcards.gen, "cost-resolution.svg")] + [
        sb_layout.stage_figure(RESULTS, wildcards.gen, f"forest-{arm}.svg") for arm in CANDIDATE_ARMS
    ]


def get_report_targets(wildcards):
    """The HTML pages (which pull in every figure) of the sweep, each generation of the chain and the run, and the
    pages of every cell behind them (one folder of pages per cell folder)."""
    pages = [sb_layout.report_page(RESULTS, None), sb_layout.summary_page(RESULTS)]
    cellsets = [sb_layout.CELLS]
    for gen in generation_chain():
        pages.append(sb_layout.report_page(RESULTS, gen))
        cellsets.append(sb_layout.cellset(gen))
    return pages + [sb_layout.cell_pages(RESULTS, cells) for cells in cellsets]


def get_cellset_records(wildcards):
    """The records of one cell folder the run uses: the cache's cells every generation of the chain read, or one
    generation's batch (its candidate and anchor cells)."""
    generation = sb_layout.cellset_generation(wildcards.cellset)
    records = generation_records(generation) if generation is not None else sweep_records()
    if generation is None:
        for gen in generation_chain():
            records += generation_records(gen)
    wanted = None if generation is None else int(generation)
    return [
        record
        for record in dict.fromkeys(records)
        if sb_layout.parse_cell_record(Path(record).relative_to(RESULTS))[0] == wanted
    ]


def summary_page_labels(wildcards, input):
    """Labels of the run page, read when `snakemake --report` runs: the outcome is known by then."""
    summary = read_json(input.summary)
    outcome = {
        "sweep": "benchmark sweep (no candidate)",
        "promoted": f"generation {summary['promoted_generation']}'s candidate was promoted",
        "not_promoted": f"no candidate cleared the gate in {summary['generations_requested']} generation(s)",
    }[summary["outcome"]]
    return {"page": f"run summary: {outcome}"}


def write_progress_plan():
    """The run plan progress.json is computed against: which cells this run may do, and the session cap."""
    plan = sb_progress.run_plan(
        experiment=EXPERIMENT,
        task_ids=TASK_IDS,
        arms=INCUMBENT_ARMS,
        anchor_arms=ANCHOR_ARMS,
        candidate_arms=CANDIDATE_ARMS,
        runs=RUN_DESIGN["max"],
        generations=GENERATIONS,
        session_cap=session_cap(),
        started_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    sb_progress.write_plan(RESULTS, plan)


def announce_run_end(ok, log=None):
    """A few lines instead of Snakemake's list of every file: outcome, where to look, what to do next."""
    lines = sb_progress.closing_lines(
        RESULTS, ok=ok, snakemake_bin=sys.argv[0], interrupted=sb_process.INTERRUPTED.is_set(), log=log
    )
    print("\n".join(lines), file=sys.stderr)
