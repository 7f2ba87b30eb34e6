# Task binding: resolve each task's target to an immutable commit, build its sanitized
# template, snapshot its hidden oracle, then merge every binding into one file.
# A binding depends only on its own task: its definition (a param: Snakemake reruns a job whose params
# changed), its oracle sources and its snapshot files, never on the suite file, so editing one task
# rebinds (and reruns the cells of) that task alone.


rule bind_task:
    input:
        oracle_sources=get_oracle_sources,
        snapshot_files=get_snapshot_files,
    output:
        binding=f"{RESULTS}/tasks/{{task}}/binding.json",
        template=directory(f"{RESULTS}/tasks/{{task}}/template"),
        oracle=directory(f"{RESULTS}/tasks/{{task}}/oracle"),
    log:
        f"logs/{EXPERIMENT}/bind_task/{{task}}.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        task=get_task_definition,
        # Oracle sources and snapshots resolve from the suite folder.
        suite=SUITE,
    script:
        "../../scripts/bind_task.py"


# The task's own check before any session: setup, then verify and the hidden oracle on the untouched code
# (the oracle must fail there, and be able to run), then on the reference solution (both must pass). Every
# cell and proposer session waits for every task's check; a refused task stops the run before any session.
rule check_task:
    input:
        binding=f"{RESULTS}/tasks/{{task}}/binding.json",
        template=f"{RESULTS}/tasks/{{task}}/template",
        oracle=f"{RESULTS}/tasks/{{task}}/oracle",
        solution=get_solution_files,
    output:
        check=f"{RESULTS}/tasks/{{task}}/check.json",
    log:
        f"logs/{EXPERIMENT}/check_task/{{task}}.log",
    conda:
        "../envs/skillbench.yaml"
    resources:
        runtime=get_check_runtime,
    params:
        task=get_check_definition,
        suite=SUITE,
        sandbox=config["sandbox"]["backend"],
        timeouts=[config["agent"]["setup_timeout_s"], config["agent"]["verify_timeout_s"]],
    script:
        "../../scripts/check_task.py"


rule merge_bindings:
    input:
        bindings=expand(f"{RESULTS}/tasks/{{task}}/binding.json", task=TASK_IDS),
    output:
        bindings=f"{RESULTS}/tasks/bindings.json",
    log:
        f"logs/{EXPERIMENT}/merge_bindings.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        skipped_expensive=SELECTION.skipped_expensive,
    script:
        "../../scripts/merge_bindings.py"
