"""Shim for rule stage_evidence: the bounded, redacted evidence bundle a generation's proposer reads."""

from skillbench.evidence import EvidenceError
from skillbench.pipeline import stage_evidence
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0], expected=(EvidenceError,)):
    stage_evidence(
        config=snakemake.config,
        generation=int(snakemake.wildcards.gen),
        results_root=f"results/{snakemake.config['experiment']}",
        out=snakemake.output.evidence,
    )
