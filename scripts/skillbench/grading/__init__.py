"""Grading what a cell left: task bindings (sanitized template, hidden oracle snapshot), verify and
the hidden oracle in the cell sandbox, grader-config masks, the review-output contract and its score against
hidden labels, and the task check before any session.
Imports `base`, `experiment` and `execution`."""
