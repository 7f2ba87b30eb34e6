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
        binding=sb_layout.binding(RESULTS, "{task}"),
        template=directory(sb_layout.template(RESULTS, "{task}")),
        oracle=directory(sb_layout.oracle_snapshot(RESULTS, "{task}")),
    log:
        sb_layout.log(EXPERIMENT, "bind_task", "{task}"),
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
# cell and proposer session waits for every task's check (through merge_checks); a refused task stops the run
# before any session. On a cluster it runs where snakemake runs, like the binding (both sandboxed): a refused
# task is known at once rather than after a queue wait, and no cell waits for the check's own trip through
# the queue (docs/slurm.md).
rule check_task:
    input:
        binding=sb_layout.binding(RESULTS, "{task}"),
        template=sb_layout.template(RESULTS, "{task}"),
        oracle=sb_layout.oracle_snapshot(RESULTS, "{task}"),
        solution=get_solution_files,
    output:
        check=sb_layout.task_check(RESULTS, "{task}"),
    log:
        sb_layout.log(EXPERIMENT, "check_task", "{task}"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    resources:
        runtime=get_check_runtime,
    params:
        task=get_check_definition,
        suite=SUITE,
        # The agent's setup and verify timeouts and the sandbox (backend, bwrap, limits).
        settings=CHECK_SETTINGS,
        # The name of the variable that holds the API key (redacted from the log); never the key.
        api_key_env=config["model"]["api_key_env"],
    script:
        "../../scripts/check_task.py"


rule merge_bindings:
    input:
        bindings=[sb_layout.binding(RESULTS, task) for task in TASK_IDS],
    output:
        bindings=sb_layout.bindings(RESULTS),
    log:
        sb_layout.log(EXPERIMENT, "merge_bindings"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        skipped_expensive=SELECTION.skipped_expensive,
        suite=SUITE,
    script:
        "../../scripts/merge_bindings.py"


# One file that says every selected task passed its check: the single input every session job waits for, so the
# DAG's edges grow with the jobs, not with jobs x tasks.
rule merge_checks:
    input:
        checks=[sb_layout.task_check(RESULTS, task) for task in TASK_IDS],
    output:
        checks=sb_layout.task_checks(RESULTS),
    log:
        sb_layout.log(EXPERIMENT, "merge_checks"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        suite=SUITE,
    script:
        "../../scripts/merge_checks.py"
