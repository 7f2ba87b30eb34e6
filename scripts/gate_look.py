"""Shim for checkpoint gate_look: one interim look of a sequential design → looks/look<k>.json."""

from skillbench.base import layout
from skillbench.base.runlog import rule_log
from skillbench.steps.gate import gate_look

with rule_log(snakemake.log[0]):
    gate_look(
        arm_sessions=dict(snakemake.params.arm_sessions),
        records=list(snakemake.input.records),
        schedules=list(snakemake.input.schedules),
        pairs=[tuple(pair) for pair in snakemake.params.pairs],
        policy=dict(snakemake.params.policy),
        design=snakemake.params.design,
        budget=dict(snakemake.params.budget),
        model=snakemake.params.model,
        generation=int(snakemake.wildcards.gen),
        look=int(snakemake.wildcards.look),
        results_root=layout.root_of_look(snakemake.output.look),
        out=snakemake.output.look,
    )
