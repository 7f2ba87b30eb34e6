"""Shim for rule schedule_batch: the start order of a generation's batch → schedule/look<k>.json."""

from skillbench.base.runlog import rule_log
from skillbench.steps.gate import schedule_batch

with rule_log(snakemake.log[0]):
    schedule_batch(
        experiment=snakemake.params.experiment,
        generation=int(snakemake.wildcards.gen),
        look=int(snakemake.wildcards.look),
        sequential=bool(snakemake.params.sequential),
        tasks=list(snakemake.params.tasks),
        pairs=[tuple(pair) for pair in snakemake.params.pairs],
        runs=list(snakemake.params.runs),
        previous_look=snakemake.input.previous[0] if snakemake.input.previous else None,
        out=snakemake.output.schedule,
    )
