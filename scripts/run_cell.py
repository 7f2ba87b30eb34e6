"""Shim for rule run_cell: one (task, arm, run) cell through real Claude Code sessions."""

import sys

from skillbench.base import layout
from skillbench.base.runlog import rule_log
from skillbench.execution.environment import secrets
from skillbench.reporting.progress import tracking_cell
from skillbench.steps.cells import run_cell

params = snakemake.params
wildcards = snakemake.wildcards
settings = dict(params.settings)
results_root = layout.root_of_cell_file(snakemake.output.record, wildcards.cellset)
# When the cell ends, progress.json is refreshed and the run line (cells, spend, ETA) printed to snakemake's output.
with (
    tracking_cell(results_root, layout.cell_label(wildcards.cellset, wildcards.task, wildcards.arm, wildcards.run)),
    rule_log(snakemake.log[0], secrets=secrets(settings["model"]["api_key_env"])),
):
    run_cell(
        settings=settings,
        run_control=dict(snakemake.resources),
        task=dict(params.task),
        arm=wildcards.arm,
        run=int(wildcards.run),
        binding=snakemake.input.binding,
        template=snakemake.input.template,
        oracle_snapshot=snakemake.input.oracle,
        model_script=snakemake.input.get("model_script") or None,
        record_out=snakemake.output.record,
        ledger_out=snakemake.output.ledger,
        attempt=snakemake.resources.attempt,
        results_root=results_root,
        cli_version=params.cli_version,
        overlay_json=snakemake.input.get("overlay"),
        log=sys.stdout,
    )
