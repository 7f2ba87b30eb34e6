# skillbench: benchmark coding-agent skills with real Claude Code sessions, and evolve them.
from snakemake.utils import min_version

min_version("9.19")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/tasks.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/evolve.smk"
include: "workflow/rules/report_inputs.smk"
include: "workflow/rules/report.smk"
# The start and end of a run (preflight, Ctrl-C handling, closing lines), also when this workflow is a module.
include: "workflow/rules/run_hooks.smk"


rule all:
    default_target: True
    input:
        get_final_targets,
        get_report_targets,
    # A message replaces Snakemake's listing of every input file (thousands of characters) for this job.
    message:
        "all outputs of the run are up to date"
