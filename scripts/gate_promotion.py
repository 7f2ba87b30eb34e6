"""Shim for checkpoint gate_promotion: rows + policy → promotion.json."""

from skillbench.base.runlog import rule_log
from skillbench.steps.gate import gate_promotion

with rule_log(snakemake.log[0]):
    gate_promotion(
        results=snakemake.input.results,
        overlay_json=snakemake.input.overlay,
        bindings=snakemake.input.bindings,
        policy=dict(snakemake.params.policy),
        model=snakemake.params.model,
        effort=snakemake.params.effort,
        out=snakemake.output.promotion,
        design=snakemake.params.design,
        look=snakemake.input.get("look"),
        accept_flags=list(snakemake.params.accept_flags),
    )
