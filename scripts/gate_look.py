"""Shim for checkpoint gate_look: one interim look of a sequential design → looks/look<k>.json."""
from skillbench.pipeline import gate_look
from skillbench.runlog import rule_log

with rule_log(snakemake.log[0]):  # noqa: F821
    gate_look(
        config=snakemake.config,  # noqa: F821
        records=list(snakemake.input.records),  # noqa: F821
        pairs=[tuple(pair) for pair in snakemake.params.pairs],  # noqa: F821
        policy=dict(snakemake.params.policy),  # noqa: F821
        design=snakemake.params.design,  # noqa: F821
        budget=dict(snakemake.params.budget),  # noqa: F821
        model=snakemake.params.model,  # noqa: F821
        generation=int(snakemake.wildcards.gen),  # noqa: F821
        look=int(snakemake.wildcards.look),  # noqa: F821
        results_root=f"results/{snakemake.config['experiment']}",  # noqa: F821
        out=snakemake.output.look,  # noqa: F821
    )
