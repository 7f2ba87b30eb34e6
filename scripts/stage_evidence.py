"""Shim for rule stage_evidence: the bounded, redacted evidence bundle a generation's proposer reads."""
from skillbench.evidence import EvidenceError
from skillbench.pipeline import stage_evidence
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0], expected=(EvidenceError,)):  # noqa: F821
    stage_evidence(
        config=snakemake.config,  # noqa: F821
        generation=int(snakemake.wildcards.gen),  # noqa: F821
        results_root=f"results/{snakemake.config['experiment']}",  # noqa: F821
        out=snakemake.output.evidence,  # noqa: F821
    )
