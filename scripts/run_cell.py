"""Shim for rule run_cell: one (task, arm, run) cell through real Claude Code sessions."""
import sys

from skillbench.breaker import OutageTripped
from skillbench.cells import CellCancelled, RetryableCellFailure
from skillbench.pipeline import api_key, run_cell
from skillbench.process import WriterBusy, install_signal_handlers, watch_parent
from skillbench.progress import tracking_cell
from skillbench.runlog import rule_log

install_signal_handlers()
watch_parent()
config = snakemake.config  # noqa: F821
wildcards = snakemake.wildcards  # noqa: F821
# When the cell ends, progress.json is refreshed and the run line (cells, spend, ETA) printed to snakemake's output.
with tracking_cell(f"results/{config['experiment']}",
                   f"{wildcards.cellset}/{wildcards.task}/{wildcards.arm}/run{wildcards.run}"), \
        rule_log(snakemake.log[0], secrets=[key for key in [api_key(config)] if key],  # noqa: F821
              expected=(RetryableCellFailure, OutageTripped, CellCancelled, WriterBusy)):
    run_cell(
        config=config,
        task=dict(snakemake.params.task),  # noqa: F821
        arm=snakemake.wildcards.arm,  # noqa: F821
        run=int(snakemake.wildcards.run),  # noqa: F821
        binding=snakemake.input.binding,  # noqa: F821
        template=snakemake.input.template,  # noqa: F821
        oracle_snapshot=snakemake.input.oracle,  # noqa: F821
        skills_root=config["skills"]["root"],
        model_script=snakemake.input.get("model_script") or None,  # noqa: F821
        record_out=snakemake.output.record,  # noqa: F821
        attempt=snakemake.resources.attempt,  # noqa: F821
        breaker_state=f"results/{config['experiment']}/.outage-breaker.json",
        cli_version=snakemake.params.cli_version,  # noqa: F821
        overlay_json=snakemake.input.get("overlay"),  # noqa: F821
        log=sys.stdout,
    )
