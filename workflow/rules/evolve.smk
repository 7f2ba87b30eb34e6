# Candidate overlays and the promotion gate. A generation freezes its candidate overlay,
# benchmarks the experiment's candidate arms beside fresh cells of their incumbent arms (the
# anchor, started in one randomised order), and the gate writes promotion.json. Two checkpoints steer the DAG: gate_look (one per sequential
# look: whether a generation needs more runs) and gate_promotion (whether another generation
# exists). These steps unblock a generation: they run first when slots are free (GENERATION_PRIORITY).


rule freeze_overlay:
    input:
        overlay=get_overlay_source,
        skills=get_skill_files,
        # Every bound hidden oracle: an overlay carrying one's content is refused before any cell.
        bindings=sb_layout.bindings(RESULTS),
        oracles=[sb_layout.oracle_snapshot(RESULTS, task) for task in TASK_IDS],
    output:
        overlay=sb_layout.overlay(RESULTS, "{gen}"),
        # The candidate's whole diff against the incumbent skills (the generation's report shows it).
        diff=sb_layout.candidate_diff(RESULTS, "{gen}"),
    log:
        sb_layout.log(EXPERIMENT, "freeze_overlay", sb_layout.generation_name("{gen}")),
    priority: GENERATION_PRIORITY
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        source=get_overlay_folder,
        # The read-only copy beside overlay.json; overlay.json (the declared output) holds its
        # digest and every consumer re-checks it. Not declared as a directory output, because
        # Snakemake would write its timestamp file into the read-only (0500) folder.
        frozen=sb_layout.frozen_overlay(RESULTS, "{gen}"),
        origin=get_candidate_origin,
        proposer_model=get_proposer_model,
        # root, evolvable, mirrors
        skills=job_settings(**config["skills"]),
        arms=CANDIDATE_ARMS,
        # The skills each selected arm invokes: which candidate arms an overlay needs.
        arm_skills=sb_arms.selected_arm_skills(config),
        # The task's own tools (what its setup and verify start): the content review flags shell commands outside them.
        task_tools=TASK_TOOLS,
    script:
        "../../scripts/freeze_overlay.py"


# The start order of a generation's batch (the cells the look reads first; the only look of a fixed design): its
# candidates' cells and its anchor's, blocked by task, drawn from a seed that names the batch. The cells' priorities
# follow the same draw (get_cell_priority); this file records it and each collected row's place in it.
rule schedule_batch:
    input:
        overlay=sb_layout.overlay(RESULTS, "{gen}"),
        # Which pairs continue into this batch.
        previous=get_previous_look,
    output:
        schedule=sb_layout.schedule(RESULTS, "{gen}", "{look}"),
    log:
        sb_layout.log(EXPERIMENT, "schedule_batch", sb_layout.generation_name("{gen}"), "look{look}"),
    priority: GENERATION_PRIORITY
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        experiment=EXPERIMENT,
        tasks=TASK_IDS,
        pairs=[list(pair) for pair in candidate_pairs()],
        runs=get_schedule_runs,
        sequential=SEQUENTIAL,
    script:
        "../../scripts/schedule_batch.py"


# An interim look of a sequential design (runs: {min, max, step}): per candidate pair promote, keep
# the incumbent or continue. One checkpoint with a look wildcard, walked by look_chain(), so later
# batches enter the DAG only when a look says continue and a resumed run re-enters at the first
# missing look.
checkpoint gate_look:
    input:
        unpack(get_look_inputs),
        overlay=sb_layout.overlay(RESULTS, "{gen}"),
        bindings=sb_layout.bindings(RESULTS),
    output:
        look=sb_layout.look(RESULTS, "{gen}", "{look}"),
    log:
        sb_layout.log(EXPERIMENT, "gate_look", sb_layout.generation_name("{gen}"), "look{look}"),
    priority: GENERATION_PRIORITY
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        policy=config["gate"],
        design=config["runs"],
        budget=config["budget"],
        pairs=[list(pair) for pair in candidate_pairs()],
        model=config["model"]["name"],
        # Sessions per cell of each arm: what the next batch costs.
        arm_sessions=sb_arms.session_counts(config),
    script:
        "../../scripts/gate_look.py"


checkpoint gate_promotion:
    input:
        unpack(get_gate_inputs),
    output:
        promotion=sb_layout.promotion(RESULTS, "{gen}"),
    log:
        sb_layout.log(EXPERIMENT, "gate_promotion", sb_layout.generation_name("{gen}")),
    priority: GENERATION_PRIORITY
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        policy=config["gate"],
        design=config["runs"],
        model=config["model"]["name"],
        effort=config["model"]["effort"],
        # Content-flag categories the user accepts: a candidate with another is held back (a change regrades only).
        accept_flags=config["evolution"]["accept_flags"],
    script:
        "../../scripts/gate_promotion.py"


rule summarize_run:
    input:
        unpack(get_summary_inputs),
    output:
        summary=report(sb_layout.summary(RESULTS), caption="../report/summary.rst", category="Run"),
        markdown=sb_layout.summary_markdown(RESULTS),
    log:
        sb_layout.log(EXPERIMENT, "summarize_run"),
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        generations=GENERATIONS,
        arms=INCUMBENT_ARMS,
        experiment=EXPERIMENT,
        # The design and the gate's min_runs shape the advice after no promotion.
        runs=config["runs"],
        min_runs=config["gate"]["min_runs"],
    script:
        "../../scripts/summarize_run.py"


rule stage_evidence:
    input:
        unpack(get_evidence_inputs),
    output:
        evidence=directory(sb_layout.evidence(RESULTS, "{gen}")),
    log:
        sb_layout.log(EXPERIMENT, "stage_evidence", sb_layout.generation_name("{gen}")),
    priority: GENERATION_PRIORITY
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        learnings=config["evolution"]["learnings"],
        # An experiment folder stands for its last generation with rows (the path as given otherwise).
        seed=SEED_RESULTS,
        evolvable=config["skills"]["evolvable"],
        # The name of the variable that holds the API key (redacted from the bundle); never the key.
        api_key_env=config["model"]["api_key_env"],
    script:
        "../../scripts/stage_evidence.py"


rule propose_overlay:
    input:
        evidence=sb_layout.evidence(RESULTS, "{gen}"),
        skills=get_skill_files,
        model_script=get_model_script,
        # The proposer's clone is checked against every bound hidden oracle before the session. Order-only
        # (ancient): rebinding a task (an edited prompt) must not buy a new proposer session; freeze_overlay
        # re-checks the overlay against the oracles as they are now.
        bindings=ancient(sb_layout.bindings(RESULTS)),
        oracles=[ancient(sb_layout.oracle_snapshot(RESULTS, task)) for task in TASK_IDS],
        # No paid session before every task passed its check.
        checks=task_checks(),
    output:
        proposal=sb_layout.proposal(RESULTS, "{gen}"),
        session=sb_layout.proposer_session(RESULTS, "{gen}"),
        prompt=sb_layout.proposer_prompt(RESULTS, "{gen}"),
        transcripts=directory(sb_layout.proposer_transcripts(RESULTS, "{gen}")),
    log:
        sb_layout.log(EXPERIMENT, "propose_overlay", sb_layout.generation_name("{gen}")),
    priority: GENERATION_PRIORITY
    retries: config["agent"]["attempts"] - 1
    conda:
        "../envs/skillbench.yaml"
    resources:
        **run_control_resources(),
        agent_sessions=1,
        runtime=get_proposer_runtime,
    params:
        # The overlay folder beside proposal.md is read by freeze_overlay; it is not a declared
        # directory output so Snakemake's timestamp file never lands inside the candidate.
        overlay=sb_layout.overlay_draft(RESULTS, "{gen}"),
        model=get_proposer_model,
        # What the proposer reads of the config: its model, the agent, the sandbox, the skills and the arms it
        # evolves.
        settings=PROPOSER_SETTINGS,
    script:
        "../../scripts/propose_overlay.py"
