# skillbench: benchmark coding-agent skills with real Claude Code sessions, and evolve them.
from snakemake.utils import min_version

min_version("9.19")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/tasks.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/evolve.smk"


onstart:
    prepare_run()


rule all:
    default_target: True
    input:
        get_final_targets,
