# Figures and HTML pages for `snakemake --report`. One rule per figure; each report (the sweep, every
# generation, the run summary) also becomes a self-contained HTML page with its figures inline, so the HTML
# report shows the reports themselves, not downloads. Input functions live in report_inputs.smk.


rule plot_cost_resolution:
    input:
        results=f"{RESULTS}/sweep/results.jsonl",
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        figure=report(
            f"{RESULTS}/sweep/figures/cost-resolution.svg",
            caption="../report/cost-resolution.rst",
            category="Benchmark",
            labels={"figure": "cost against resolution"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_cost_resolution/sweep.log",
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
        results=f"{RESULTS}/gen{{gen}}/results.jsonl",
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        figure=report(
            f"{RESULTS}/gen{{gen}}/figures/cost-resolution.svg",
            caption="../report/cost-resolution.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "cost against resolution"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_cost_resolution/gen{{gen}}.log",
    localrule: True
    params:
        arms=GENERATION_ARMS,
        title="Generation {gen}: cost against resolution per arm",


rule plot_paired_improvement:
    input:
        promotion=f"{RESULTS}/gen{{gen}}/promotion.json",
    output:
        figure=report(
            f"{RESULTS}/gen{{gen}}/figures/forest-{{candidate}}.svg",
            caption="../report/forest.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "paired improvement: {candidate}"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_paired_improvement/gen{{gen}}-{{candidate}}.log",
    wildcard_constraints:
        candidate="candidate_[a-z0-9_]+",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/plot_paired_improvement.py"


rule plot_generation_chain:
    input:
        summary=f"{RESULTS}/summary.json",
        promotions=get_chain_promotions,
    output:
        figure=report(
            f"{RESULTS}/figures/generations.svg",
            caption="../report/generations.rst",
            category="Run",
            labels={"page": "figure: the generation chain"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_generation_chain.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/plot_generation_chain.py"


rule plot_session_spend:
    input:
        results=get_run_results,
        proposer_sessions=get_proposer_sessions,
    output:
        figure=report(
            f"{RESULTS}/figures/spend.svg",
            caption="../report/spend.rst",
            category="Run",
            labels={"page": "figure: where the money went"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_session_spend.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        title=f"Run {EXPERIMENT}: cost and turns per session role",
    script:
        "../../scripts/plot_session_spend.py"


rule plot_cell_timeline:
    input:
        results=get_run_results,
    output:
        figure=report(
            f"{RESULTS}/figures/timeline.svg",
            caption="../report/timeline.rst",
            category="Run",
            labels={"page": "figure: timeline of cells"},
        ),
    log:
        f"logs/{EXPERIMENT}/plot_cell_timeline.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        title=f"Run {EXPERIMENT}: cells over time on worker slots",
    script:
        "../../scripts/plot_cell_timeline.py"


rule render_report_page:
    input:
        markdown=f"{RESULTS}/sweep/report.md",
        figures=[f"{RESULTS}/sweep/figures/cost-resolution.svg"],
    output:
        page=report(
            f"{RESULTS}/sweep/report.html",
            caption="../report/sweep.rst",
            category="Benchmark",
            labels={"figure": "the sweep report"},
        ),
    log:
        f"logs/{EXPERIMENT}/render_report_page/sweep.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        title=f"Benchmark sweep of {EXPERIMENT}",
    script:
        "../../scripts/render_report_page.py"


use rule render_report_page as render_generation_page with:
    input:
        markdown=f"{RESULTS}/gen{{gen}}/report.md",
        figures=get_generation_figures,
    output:
        page=report(
            f"{RESULTS}/gen{{gen}}/report.html",
            caption="../report/generation.rst",
            category="Generations",
            subcategory="generation {gen}",
            labels={"figure": "the generation report"},
        ),
    log:
        f"logs/{EXPERIMENT}/render_report_page/gen{{gen}}.log",
    localrule: True
    params:
        title=f"Generation {{gen}} of {EXPERIMENT}",


use rule render_report_page as render_summary_page with:
    input:
        markdown=f"{RESULTS}/summary.md",
        summary=f"{RESULTS}/summary.json",
        figures=get_run_figures,
    output:
        page=report(
            f"{RESULTS}/summary.html",
            caption="../report/summary.rst",
            category="Run",
            labels=summary_page_labels,
        ),
    log:
        f"logs/{EXPERIMENT}/render_report_page/summary.log",
    localrule: True
    params:
        title=None,
