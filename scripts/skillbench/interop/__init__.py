"""Results in the formats other tools read: each session's trajectory in ATIF (Harbor's Agent Trajectory
Interchange Format) with per-step metrics from the gateway's ledger, each cell as a Harbor trial folder, and a
results folder as Inspect eval logs (`skillbench export --inspect`, the optional `inspect` extra). Reads what
the layers below wrote (transcripts, ledgers, records, promotion documents); runs nothing."""
