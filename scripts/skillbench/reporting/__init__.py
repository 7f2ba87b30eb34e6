"""What people read: report.md and the run summary, figures, the HTML pages, progress, estimates
and the end-of-run lines. Imports the packages below it."""
