"""Rule logs: send a rule script's output to its `log:` file, redacted, and fail with a clear message.

Every shim wraps its one rule step in `rule_log(path, secrets)`: stdout and stderr go to the log, an
expected error (any `SkillbenchError`: bad input, a refused overlay, a retryable cell failure, an open
outage breaker) is written as one redacted line instead of a traceback, any other error (a bug) with
its traceback, and the job exits non-zero so Snakemake sees the failure (and retries it where the
rule says so).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from skillbench.base.errors import SkillbenchError
from skillbench.base.redaction import redact_text


@contextmanager
def rule_log(path: str | Path, secrets: Sequence[str] = ()) -> Iterator[None]:
    log_path = Path(path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8", buffering=1) as log:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            yield
        except SkillbenchError as exc:
            print(f"error: {redact_text(str(exc), secrets)}", file=log)
            sys.stdout, sys.stderr = saved
            print(f"error: {redact_text(str(exc), secrets)}", file=sys.stderr)
            raise SystemExit(1) from None
        except Exception:
            print(redact_text(traceback.format_exc(), secrets), file=log)
            sys.stdout, sys.stderr = saved
            raise SystemExit(1) from None
        finally:
            sys.stdout, sys.stderr = saved
