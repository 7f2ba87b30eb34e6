# Cells: one (task, arm, run) = a fresh clone, the arm's headless Claude Code sessions in
# the sandbox, the task's verify, and the hidden oracle. Generation N's batch (its candidate
# cells and its anchor, fresh cells of their incumbent arms started in one drawn order) lives in
# that generation's folder; the other incumbent arms' cells live in the cache (cells/), which every
# generation reuses while their inputs are unchanged (skillbench.base.layout).


rule run_cell:
    input:
        unpack(get_cell_inputs),
    output:
        record=sb_layout.cell_record(RESULTS, "{cellset}", "{task}", "{arm}", "{run}"),
        patch=sb_layout.cell_patch(RESULTS, "{cellset}", "{task}", "{arm}", "{run}"),
        transcripts=directory(sb_layout.cell_transcripts(RESULTS, "{cellset}", "{task}", "{arm}", "{run}")),
        ledger=sb_layout.cell_ledger(RESULTS, "{cellset}", "{task}", "{arm}", "{run}"),
    log:
        sb_layout.log(EXPERIMENT, "run_cell", sb_layout.cell_label("{cellset}", "{task}", "{arm}", "{run}")),
    priority: get_cell_priority
    retries: config["agent"]["attempts"] - 1
    conda:
        "../envs/skillbench.yaml"
    resources:
        **run_control_resources(),
        agent_sessions=1,
        attempt=lambda wildcards, attempt: attempt,
        runtime=get_cell_runtime,
    params:
        task=get_task_definition,
        # Everything of the config the cell reads (its arm, prompts, model, agent incl. the price table, sandbox
        # and limits, skills): a change to any of it reruns the cell.
        settings=get_cell_settings,
        # A CLI upgrade changes what a cell measures: the version of the arm's agent CLI keys the cache.
        cli_version=get_cli_version,
        extensions=get_arm_extensions,
        budget_cut=get_budget_cut,
    # A `shell:` step, not a `script:` one: a script job first imports much of Snakemake to unpickle its
    # `snakemake` object: 0.07–0.2 s of every cell's slot in bench/harness_overhead.py (docs/internals.md). Params and
    # resources go over as Python literals; the interpreter and the shim come from the environment (common.smk).
    shell:
        '"$SKILLBENCH_STEP_PYTHON" "$SKILLBENCH_SCRIPTS/run_cell.py" --log={log:q}'
        " --record={output.record:q} --ledger={output.ledger:q}"
        " --binding={input.binding:q} --template={input.template:q} --oracle={input.oracle:q}"
        " --model-script={input.model_script:q} --overlay={input.overlay:q}"
        " --cellset={wildcards.cellset:q} --task={wildcards.task:q} --arm={wildcards.arm:q} --run={wildcards.run:q}"
        " --attempt={resources.attempt} --task-definition={params.task!r:q} --settings={params.settings!r:q}"
        " --cli-version={params.cli_version!r:q} --run-control attempts={resources.attempts!r:q}"
        " outage_streak={resources.outage_streak!r:q} heartbeat_s={resources.heartbeat_s!r:q}"
        " budget_usd={resources.budget_usd!r:q} session_budget_usd={resources.session_budget_usd!r:q}"
