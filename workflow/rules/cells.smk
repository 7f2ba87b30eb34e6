# Cells: one (task, arm, run) = a fresh clone, the arm's headless Claude Code sessions in
# the sandbox, the task's verify, and the hidden oracle. Incumbent and baseline cells live in
# results/<experiment>/cells/ and every generation reuses them while their inputs are
# unchanged; candidate cells of generation N live in results/<experiment>/gen<N>/cells/.


rule run_cell:
    input:
        unpack(get_cell_inputs),
    output:
        record=f"{RESULTS}/{{cellset}}/{{task}}/{{arm}}/run{{run}}/record.json",
        patch=f"{RESULTS}/{{cellset}}/{{task}}/{{arm}}/run{{run}}/patch.diff",
        transcripts=directory(f"{RESULTS}/{{cellset}}/{{task}}/{{arm}}/run{{run}}/transcripts"),
    params:
        task=get_task_definition,
        arm=get_arm_definition,
        prompts=get_session_prompts,
        model=config["model"],
        tools=config["agent"]["tools"],
        # A CLI upgrade or a new price table changes what a cell measures: both key the cache.
        cli_version=CLI_VERSION,
        prices=config["agent"]["prices"],
        timeouts=[
            config["agent"]["session_timeout_s"],
            config["agent"]["setup_timeout_s"],
            config["agent"]["verify_timeout_s"],
        ],
        sandbox=config["sandbox"]["backend"],
        # Resource limits can change a cell's outcome (a memory-hungry test suite), so they key the cache.
        limits=config["sandbox"]["limits"],
        extensions=get_arm_extensions,
    log:
        f"logs/{EXPERIMENT}/run_cell/{{cellset}}/{{task}}/{{arm}}/run{{run}}.log",
    resources:
        agent_sessions=1,
        attempt=lambda wildcards, attempt: attempt,
        runtime=get_cell_runtime,
    retries: config["agent"]["attempts"] - 1
    conda:
        "../envs/skillbench.yaml"
    script:
        "../../scripts/run_cell.py"
