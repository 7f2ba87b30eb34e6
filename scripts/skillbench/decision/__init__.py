"""The promotion decision: pure functions of result rows and a policy (statistics, aggregation, the
gate's rules and sequential looks) and the promotion document. Imports `base` and `experiment`.

Inside it, from the bottom up: `policy` (the typed policy), `stats` and `aggregate`, `pairs` (a pair's gathered
evidence and the checks both rules run), `significance` (the tests behind a decision), `upstream` and
`noise_aware` (the two rules), `agents` (across agents), `sequential` (looks) and `document` (the promotion
document's parts), `gate` (the entry point), `promotion` (grading from files); lint-imports keeps that order."""
