# Collecting rows and rendering reports, for the plain sweep (evolution.generations: 0) and
# for every generation (incumbent arms plus the generation's candidate arms).


rule collect_results:
    input:
        records=cell_records(INCUMBENT_ARMS),
        bindings=sb_layout.bindings(RESULTS),
    output:
        results=sb_layout.rows(RESULTS, None),
    log:
        sb_layout.log(EXPERIMENT, "collect_results", sb_layout.SWEEP),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        arms=INCUMBENT_ARMS,
    script:
        "../../scripts/collect_results.py"


use rule collect_results as collect_generation_results with:
    input:
        records=get_generation_records,
        bindings=sb_layout.bindings(RESULTS),
    output:
        results=sb_layout.rows(RESULTS, "{gen}"),
    log:
        sb_layout.log(EXPERIMENT, "collect_results", sb_layout.generation_name("{gen}")),
    localrule: True
    params:
        arms=GENERATION_ARMS,


rule render_report:
    input:
        results=sb_layout.rows(RESULTS, None),
        bindings=sb_layout.bindings(RESULTS),
    output:
        report=sb_layout.report(RESULTS, None),
    log:
        sb_layout.log(EXPERIMENT, "render_report", sb_layout.SWEEP),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        arms=INCUMBENT_ARMS,
        model=config["model"],
        runs=config["runs"],
        baseline=config["report"]["baseline_arm"],
        baseline_arms=config["report"]["baseline_arms"],
        # The sessions' allowed tools decide whether the report warns about subagent tokens.
        tools=config["agent"]["tools"],
    script:
        "../../scripts/render_report.py"


use rule render_report as render_generation_report with:
    input:
        results=sb_layout.rows(RESULTS, "{gen}"),
        bindings=sb_layout.bindings(RESULTS),
        promotion=sb_layout.promotion(RESULTS, "{gen}"),
        diff=sb_layout.candidate_diff(RESULTS, "{gen}"),
    output:
        report=sb_layout.report(RESULTS, "{gen}"),
    log:
        sb_layout.log(EXPERIMENT, "render_report", sb_layout.generation_name("{gen}")),
    localrule: True
    params:
        arms=GENERATION_ARMS,
        model=config["model"],
        runs=config["runs"],
        baseline=config["report"]["baseline_arm"],
        baseline_arms=config["report"]["baseline_arms"],
        # The sessions' allowed tools decide whether the report warns about subagent tokens.
        tools=config["agent"]["tools"],
