# Collecting rows and rendering reports, for the sweep (the incumbent arms: the cache, and in an evolution run
# generation 0's anchor) and for every generation (its batch, candidates and anchor, and the cache's arms). Each row
# names its batch, time block and start position (the batch's schedule).


rule collect_results:
    input:
        records=sweep_records(),
        schedules=sweep_schedules(),
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
        # Which look's batch a run belongs to.
        design=config["runs"],
    script:
        "../../scripts/collect_results.py"


use rule collect_results as collect_generation_results with:
    input:
        unpack(get_generation_inputs),
        bindings=sb_layout.bindings(RESULTS),
    output:
        results=sb_layout.rows(RESULTS, "{gen}"),
    log:
        sb_layout.log(EXPERIMENT, "collect_results", sb_layout.generation_name("{gen}")),
    localrule: True
    params:
        arms=GENERATION_ARMS,
        design=config["runs"],


# What `skillbench estimate` prices a run from when nothing has run yet: the first two runs of every incumbent arm on
# every task (two, so that run-to-run noise is measured; estimate passes --config runs=2), in the cache. A run keeps
# those cells (the cache's arms reuse them); a generation's anchor runs afresh beside its candidate, whatever the cache
# holds.
rule sample_costs:
    input:
        cell_records(INCUMBENT_ARMS, runs=min(len(RUNS), 2)),
    message:
        "the first runs of every incumbent arm on every task, in the cache: skillbench estimate prices the experiment from them"


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
        # The anchor against the incumbent's earlier cells (the sweep's): how far it moved since.
        sweep=sb_layout.rows(RESULTS, None),
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
