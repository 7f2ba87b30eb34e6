"""Shim for rule run_cell: one (task, arm, run) cell through real agent sessions.

A `shell:` step (workflow/rules/cells.smk says why): its arguments are the rule's named inputs, outputs, log and
wildcards, and its params and run-control resources as Python literals."""

import argparse
import sys

from skillbench.base import layout
from skillbench.base.runlog import rule_log
from skillbench.base.shellargs import literal, literals
from skillbench.execution.environment import secrets
from skillbench.reporting.progress import tracking_cell
from skillbench.steps.cells import run_cell

parser = argparse.ArgumentParser(description=__doc__)
FILES = ("log", "record", "ledger", "binding", "template", "oracle", "model-script", "overlay")
for name in (*FILES, "cellset", "task", "arm", "run", "attempt", "task-definition", "settings", "cli-version"):
    parser.add_argument(f"--{name}", required=True)
parser.add_argument("--run-control", nargs="*", default=[])
arguments = parser.parse_args()

settings = literal(arguments.settings, "--settings")
results_root = layout.root_of_cell_file(arguments.record, arguments.cellset)
# When the cell ends, progress.json is refreshed and the run line (cells, spend, ETA) printed to snakemake's output.
with (
    tracking_cell(results_root, layout.cell_label(arguments.cellset, arguments.task, arguments.arm, arguments.run)),
    rule_log(arguments.log, secrets=secrets(settings["model"]["api_key_env"])),
):
    run_cell(
        settings=settings,
        run_control=literals(arguments.run_control, "--run-control"),
        task=literal(arguments.task_definition, "--task-definition"),
        arm=arguments.arm,
        run=int(arguments.run),
        binding=arguments.binding,
        template=arguments.template,
        oracle_snapshot=arguments.oracle,
        # An optional input the cell lacks is an empty argument.
        model_script=arguments.model_script or None,
        record_out=arguments.record,
        ledger_out=arguments.ledger,
        attempt=int(arguments.attempt),
        results_root=results_root,
        cli_version=literal(arguments.cli_version, "--cli-version"),
        overlay_json=arguments.overlay or None,
        log=sys.stdout,
    )
