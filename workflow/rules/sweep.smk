# The benchmark sweep of the incumbent arms (evolution.generations: 0).


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


rule render_report:
    input:
        results=f"{RESULTS}/sweep/results.jsonl",
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        report=report(
            f"{RESULTS}/sweep/report.md",
            caption="../report/sweep.rst",
            category="Benchmark",
        ),
    params:
        arms=INCUMBENT_ARMS,
        model=config["model"],
        runs=config["runs"],
    log:
        f"logs/{EXPERIMENT}/render_report/sweep.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/render_report.py"
