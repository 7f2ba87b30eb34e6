"""The promotion decision: pure functions of result rows and a policy (statistics, aggregation, the
gate's rules and sequential looks) and the promotion document. Imports `base` and `experiment`."""
