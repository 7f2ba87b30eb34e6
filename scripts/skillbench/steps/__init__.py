"""Rule steps: the I/O edge between the Snakemake shims and the library, one module per rule file.

Every shim in `scripts/<rule>.py` calls exactly one function of `skillbench.steps.<stage>` (named like its
rule) with plain values taken from the rule's params, inputs, outputs, wildcards, log and resources —
never the workflow's config: a rule's params are its job's whole interface (docs/internals.md). A step
reads its inputs (validating them), calls the library, and writes its outputs atomically after
validating them. Each step module imports only what its rules need, so a cell job never loads the
gate's statistics and a report job never loads the sandbox; what every session job does first is in
`steps.session`.
"""
