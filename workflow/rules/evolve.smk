# Candidate overlays and the promotion gate. A generation freezes its candidate overlay,
# benchmarks the experiment's candidate arms next to the shared incumbent cells, and the
# gate — the only checkpoint: it decides whether another generation exists — writes
# promotion.json.


rule freeze_overlay:
    input:
        overlay=get_overlay_source,
        skills=get_skill_files,
        # Every bound hidden oracle: an overlay carrying one's content is refused before any cell.
        bindings=f"{RESULTS}/tasks/bindings.json",
        oracles=expand(f"{RESULTS}/tasks/{{task}}/oracle", task=TASK_IDS),
    output:
        overlay=f"{RESULTS}/gen{{gen}}/overlay.json",
    log:
        f"logs/{EXPERIMENT}/freeze_overlay/gen{{gen}}.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        source=get_overlay_folder,
        # The read-only copy beside overlay.json; overlay.json (the declared output) holds its
        # digest and every consumer re-checks it. Not declared as a directory output, because
        # Snakemake would write its timestamp file into the read-only (0500) folder.
        frozen=f"{RESULTS}/gen{{gen}}/frozen-overlay",
        origin=get_candidate_origin,
        proposer_model=get_proposer_model,
        evolvable=config["skills"]["evolvable"],
        mirrors=config["skills"]["mirrors"],
        arms=CANDIDATE_ARMS,
    script:
        "../../scripts/freeze_overlay.py"


# An interim look of a sequential design (runs: {min, max, step}): per candidate pair promote, keep
# the incumbent or continue. One checkpoint with a look wildcard, walked by look_chain(), so later
# batches enter the DAG only when a look says continue and a resumed run re-enters at the first
# missing look.
checkpoint gate_look:
    input:
        records=get_look_records,
        overlay=f"{RESULTS}/gen{{gen}}/overlay.json",
        bindings=f"{RESULTS}/tasks/bindings.json",
    output:
        look=f"{RESULTS}/gen{{gen}}/looks/look{{look}}.json",
    log:
        f"logs/{EXPERIMENT}/gate_look/gen{{gen}}/look{{look}}.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        policy=config["gate"],
        design=config["runs"],
        budget=config["budget"],
        pairs=[list(pair) for pair in candidate_pairs()],
        model=config["model"]["name"],
    script:
        "../../scripts/gate_look.py"


checkpoint gate_promotion:
    input:
        unpack(get_gate_inputs),
    output:
        promotion=f"{RESULTS}/gen{{gen}}/promotion.json",
    log:
        f"logs/{EXPERIMENT}/gate_promotion/gen{{gen}}.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        policy=config["gate"],
        design=config["runs"],
        model=config["model"]["name"],
        effort=config["model"]["effort"],
    script:
        "../../scripts/gate_promotion.py"


rule summarize_run:
    input:
        unpack(get_summary_inputs),
    output:
        summary=report(f"{RESULTS}/summary.json", caption="../report/summary.rst", category="Run"),
        markdown=f"{RESULTS}/summary.md",
    log:
        f"logs/{EXPERIMENT}/summarize_run.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        generations=GENERATIONS,
        arms=INCUMBENT_ARMS,
    script:
        "../../scripts/summarize_run.py"


rule stage_evidence:
    input:
        unpack(get_evidence_inputs),
    output:
        evidence=directory(f"{RESULTS}/gen{{gen}}/evidence"),
    log:
        f"logs/{EXPERIMENT}/stage_evidence/gen{{gen}}.log",
    localrule: True
    conda:
        "../envs/skillbench.yaml"
    params:
        learnings=config["evolution"]["learnings"],
        seed=config["evolution"]["seed_results"],
    script:
        "../../scripts/stage_evidence.py"


rule propose_overlay:
    input:
        evidence=f"{RESULTS}/gen{{gen}}/evidence",
        skills=get_skill_files,
        model_script=get_model_script,
        # The proposer's clone is checked against every bound hidden oracle before the session. Order-only
        # (ancient): rebinding a task (an edited prompt) must not buy a new proposer session; freeze_overlay
        # re-checks the overlay against the oracles as they are now.
        bindings=ancient(f"{RESULTS}/tasks/bindings.json"),
        oracles=[ancient(path) for path in expand(f"{RESULTS}/tasks/{{task}}/oracle", task=TASK_IDS)],
        # No paid session before every task passed its check.
        checks=task_checks(),
    output:
        proposal=f"{RESULTS}/gen{{gen}}/proposal.md",
        session=f"{RESULTS}/gen{{gen}}/proposer-session.json",
        prompt=f"{RESULTS}/gen{{gen}}/proposer-prompt.md",
        transcripts=directory(f"{RESULTS}/gen{{gen}}/transcripts"),
    log:
        f"logs/{EXPERIMENT}/propose_overlay/gen{{gen}}.log",
    retries: config["agent"]["attempts"] - 1
    conda:
        "../envs/skillbench.yaml"
    resources:
        agent_sessions=1,
        runtime=get_proposer_runtime,
    params:
        # The overlay folder beside proposal.md is read by freeze_overlay; it is not a declared
        # directory output so Snakemake's timestamp file never lands inside the candidate.
        overlay=f"{RESULTS}/gen{{gen}}/overlay",
        model=get_proposer_model,
        evolvable=config["skills"]["evolvable"],
        sandbox=config["sandbox"]["backend"],
    script:
        "../../scripts/propose_overlay.py"
