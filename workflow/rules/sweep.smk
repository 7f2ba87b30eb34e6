# Collecting rows and rendering reports, for the plain sweep (evolution.generations: 0) and
# for every generation (incumbent arms plus the generation's candidate arms).


rule collect_results:
    input:
        records=cell_records(INCUMBENT_ARMS),
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        results=f"{RESULTS}/sweep/results.jsonl",
    params:
        arms=INCUMBENT_ARMS,
    log:
        f"logs/{EXPERIMENT}/collect_results/sweep.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/collect_results.py"


use rule collect_results as collect_generation_results with:
    input:
        records=get_generation_records,
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        results=f"{RESULTS}/gen{{gen}}/results.jsonl",
    params:
        arms=GENERATION_ARMS,
    log:
        f"logs/{EXPERIMENT}/collect_results/gen{{gen}}.log",
    localrule: True


rule render_report:
    input:
        results=f"{RESULTS}/sweep/results.jsonl",
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        report=f"{RESULTS}/sweep/report.md",
    params:
        arms=INCUMBENT_ARMS,
        model=config["model"],
        runs=config["runs"],
        baseline=config["report"]["baseline_arm"],
    log:
        f"logs/{EXPERIMENT}/render_report/sweep.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/render_report.py"


use rule render_report as render_generation_report with:
    input:
        results=f"{RESULTS}/gen{{gen}}/results.jsonl",
        bindings=f"{RESULTS}/tasks/bindings.json",
        promotion=f"{RESULTS}/gen{{gen}}/promotion.json",
    output:
        report=f"{RESULTS}/gen{{gen}}/report.md",
    params:
        arms=GENERATION_ARMS,
        model=config["model"],
        runs=config["runs"],
        baseline=config["report"]["baseline_arm"],
    log:
        f"logs/{EXPERIMENT}/render_report/gen{{gen}}.log",
    localrule: True
