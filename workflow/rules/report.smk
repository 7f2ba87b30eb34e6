# Figures and HTML pages for `snakemake --report`. One rule per figure (the run's spend and timeline share one);
# each report (the sweep, every generation, the run summary) also becomes a self-contained HTML page with its
# figures inline, so the HTML report shows the reports themselves, not downloads. Input functions live in report_inputs.smk.


rule plot_cost_resolution:
    input:
        results=sb_layout.rows(RESULTS, None),
        bindings=sb_layout.bindings(RESULTS),
    output:
        figure=report(
            sb_layout.stage_figure(RESULTS, None, "cost-resolution.svg"),
            caption="../report/cost-resolution.rst",
            category="Benchmark",
            labels={"figure": "cost against resolution"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "plot_cost_resolution", sb_layout.SWEEP),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        arms=INCUMBENT_ARMS,
        title="Sweep: cost against resolution per arm",
    script:
        "../../scripts/plot_cost_resolution.py"


use rule plot_cost_resolution as plot_generation_cost_resolution with:
    input:
        results=sb_layout.rows(RESULTS, "{gen}"),
        bindings=sb_layout.bindings(RESULTS),
    output:
        figure=report(
            sb_layout.stage_figure(RESULTS, "{gen}", "cost-resolution.svg"),
            caption="../report/cost-resolution.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "cost against resolution"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "plot_cost_resolution", sb_layout.generation_name("{gen}")),
    localrule: True
    params:
        arms=GENERATION_ARMS,
        title="Generation {gen}: cost against resolution per arm",


rule plot_paired_improvement:
    input:
        promotion=sb_layout.promotion(RESULTS, "{gen}"),
    output:
        figure=report(
            sb_layout.stage_figure(RESULTS, "{gen}", "forest-{candidate}.svg"),
            caption="../report/forest.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "paired improvement: {candidate}"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "plot_paired_improvement", sb_layout.generation_name("{gen}") + "-{candidate}"),
    wildcard_constraints:
        candidate=f"{sb_arms.CANDIDATE_PREFIX}[a-z0-9_]+",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/plot_paired_improvement.py"


rule plot_generation_chain:
    input:
        summary=sb_layout.summary(RESULTS),
        promotions=get_chain_promotions,
    output:
        figure=report(
            sb_layout.run_figure(RESULTS, "generations.svg"),
            caption="../report/generations.rst",
            category="Run",
            labels={"page": "figure: the generation chain"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "plot_generation_chain"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/plot_generation_chain.py"


# The run's spend and timeline figures come from the same cell records: one job reads them once and draws both.
rule plot_run_figures:
    input:
        results=get_run_results,
        proposer_sessions=get_proposer_sessions,
    output:
        spend=report(
            sb_layout.run_figure(RESULTS, "spend.svg"),
            caption="../report/spend.rst",
            category="Run",
            labels={"page": "figure: where the money went"},
        ),
        timeline=report(
            sb_layout.run_figure(RESULTS, "timeline.svg"),
            caption="../report/timeline.rst",
            category="Run",
            labels={"page": "figure: timeline of cells"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "plot_run_figures"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        # The experiment's arm order gives every arm its colour, the same in every figure.
        arms=INCUMBENT_ARMS,
        spend_title=f"Run {EXPERIMENT}: cost and turns per session role",
        timeline_title=f"Run {EXPERIMENT}: cells over time on worker slots",
    script:
        "../../scripts/plot_run_figures.py"


rule render_report_page:
    input:
        markdown=sb_layout.report(RESULTS, None),
        figures=[sb_layout.stage_figure(RESULTS, None, "cost-resolution.svg")],
    output:
        page=report(
            sb_layout.report_page(RESULTS, None),
            caption="../report/sweep.rst",
            category="Benchmark",
            labels={"figure": "the sweep report"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "render_report_page", sb_layout.SWEEP),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        title=f"Benchmark sweep of {EXPERIMENT}",
    script:
        "../../scripts/render_report_page.py"


use rule render_report_page as render_generation_page with:
    input:
        markdown=sb_layout.report(RESULTS, "{gen}"),
        figures=get_generation_figures,
    output:
        page=report(
            sb_layout.report_page(RESULTS, "{gen}"),
            caption="../report/generation.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "the generation report"},
        ),
    log:
        sb_layout.log(EXPERIMENT, "render_report_page", sb_layout.generation_name("{gen}")),
    localrule: True
    params:
        title=f"Generation {{gen}} of {EXPERIMENT}",


use rule render_report_page as render_summary_page with:
    input:
        markdown=sb_layout.summary_markdown(RESULTS),
        summary=sb_layout.summary(RESULTS),
        figures=get_run_figures,
    output:
        page=report(
            sb_layout.summary_page(RESULTS),
            caption="../report/summary.rst",
            category="Run",
            labels=summary_page_labels,
        ),
    log:
        sb_layout.log(EXPERIMENT, "render_report_page", "summary"),
    localrule: True
    params:
        title=None,


# Every cell of a cell folder (the shared incumbent cells, or one generation's candidate cells) gets its page in one
# job: a job per cell spent most of a small run's tail starting Python. Each page is registered with the report
# through the folder's pattern, with the cell's task, arm and run as its labels.
rule render_cell_pages:
    input:
        records=get_cellset_records,
    output:
        pages=report(
            directory(sb_layout.cell_pages(RESULTS, "{cellset}")),
            patterns=[sb_layout.CELL_PAGE_PATTERN],
            caption="../report/cell.rst",
            category="Cells",
            subcategory="{task}",
            labels={"arm": "{arm}", "run": "{run}", "folder": "{cellset}"},
        ),
        # The same pages with the hidden oracle's output: owner-only, never registered with the report.
        authors=directory(sb_layout.cell_author_pages(RESULTS, "{cellset}")),
    log:
        sb_layout.log(EXPERIMENT, "render_cell_pages", "{cellset}"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        # The experiment's arm order gives each arm its colour, the same as in the figures.
        arms=INCUMBENT_ARMS,
    script:
        "../../scripts/render_cell_pages.py"
