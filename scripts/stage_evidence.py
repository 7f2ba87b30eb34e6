"""Shim for rule stage_evidence: the bounded, redacted evidence bundle a generation's proposer reads."""

from skillbench.base import layout
from skillbench.base.runlog import rule_log
from skillbench.steps.evolve import stage_evidence

with rule_log(snakemake.log[0]):
    stage_evidence(
        generation=int(snakemake.wildcards.gen),
        results_root=layout.root_of_generation_file(snakemake.output.evidence),
        seed=snakemake.params.seed,
        learnings=snakemake.params.learnings,
        evolvable=list(snakemake.params.evolvable),
        api_key_env=snakemake.params.api_key_env,
        out=snakemake.output.evidence,
    )
