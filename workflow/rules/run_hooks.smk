# The run's start and end: the Bubblewrap preflight, the outage-breaker reset, Ctrl-C handling and the progress
# plan before the first job; the closing lines after the last. Snakemake runs only the top-level Snakefile's
# onstart/onsuccess/onerror and drops a module's, so `onstart:` here would be lost when this workflow is used as a
# module (`module skillbench: ...; use rule * from skillbench`). The handlers are therefore added to the top-level
# workflow's, whichever Snakefile includes this file, after any the consumer defined before its `use rule`.
# Snakemake (9.27) offers no public call for that, so its private _onstart/_onsuccess/_onerror are wrapped; a
# Snakemake without them is refused rather than run without the preflight.
from snakemake.exceptions import WorkflowError  # noqa: E402


def start_run():
    """In the snakemake process, once per real run (not a dry-run, not when nothing is to be done), after the
    scheduler took the lock and installed its own SIGTERM handler, before any job."""
    prepare_run()
    write_progress_plan()


def chain_run_hook(name, ours):
    """Run `ours`, then the handler the top-level workflow already had (the consumer's, or Snakemake's no-op)."""
    previous = getattr(workflow, name, None)
    if not callable(previous):
        raise WorkflowError(
            f"this Snakemake has no workflow.{name}: skillbench cannot register its preflight (Bubblewrap check, "
            "breaker reset, Ctrl-C handling), so it refuses to run"
        )

    def hook(log):
        ours()
        previous(log)

    setattr(workflow, name, hook)


chain_run_hook("_onstart", start_run)
chain_run_hook("_onsuccess", lambda: announce_run_end(ok=True))
chain_run_hook("_onerror", lambda: announce_run_end(ok=False))
