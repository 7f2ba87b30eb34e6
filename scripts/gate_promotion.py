"""Shim for checkpoint gate_promotion: rows + policy → promotion.json."""
from skillbench.pipeline import gate_promotion
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    gate_promotion(
        results=snakemake.input.results,  # noqa: F821
        overlay_json=snakemake.input.overlay,  # noqa: F821
        bindings=snakemake.input.bindings,  # noqa: F821
        policy=dict(snakemake.params.policy),  # noqa: F821
        model=snakemake.params.model,  # noqa: F821
        effort=snakemake.params.effort,  # noqa: F821
        out=snakemake.output.promotion,  # noqa: F821
        design=snakemake.params.design,  # noqa: F821
        look=snakemake.input.get("look"),  # noqa: F821
    )
