"""skillbench: benchmark and evolve coding-agent skills with real agent sessions.

The library is layered; a package imports only from the packages below it (an import-linter
contract in pyproject.toml, checked by `make test`, keeps it so):

    cli, steps           the `skillbench` command, and the rule steps the Snakemake shims call
    preflight            the checks of an experiment that need no agent session (parse time)
    reporting            report.md, summaries, figures, HTML pages, progress and estimates
    interop              results in other tools' formats: ATIF trajectories, Harbor trials, Inspect eval logs
    evolution            the proposer's evidence, the proposer session, applying a promotion
    decision             the promotion gate: statistics, aggregation, promotion documents
    grading              verify, the hidden oracle, grader masks, task bindings and checks
    execution            cells, agent sessions, the sandbox, the model gateway and scripted model, MCP, plugins
    experiment           what a user declares: config checks, the task suite, arms, skills and overlays
    base                 artifacts and schemas, records, the results layout, errors, redaction, processes
"""
