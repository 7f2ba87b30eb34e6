"""Task supply: tasks of the ordinary format made from a repository's own history (`mine`: commits that change
source and tests become base and solution refs under `refs/skillbench/`, a fail-to-pass hidden oracle, a
pass-to-pass `verify`, a prompt that never shows the fix, each checked by the task check before it is written) and
imported from the formats the field uses (Harbor task directories, SWE-bench instances, `claude plugin eval`
cases, skill-creator trigger queries), with the offline model script that replays their reference solutions and
the yield report. Imports `grading`, `execution`, `experiment` and `base`; only the `skillbench` command uses it."""
