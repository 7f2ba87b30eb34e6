"""Rule logs: send a rule script's output to its `log:` file, redacted, and fail with a clear message.

Every shim wraps its one library call in `rule_log(path, secrets, expected)`: stdout and stderr go
to the log, an error of an `expected` class (bad input, a retryable cell failure, an open outage
breaker) is written as one redacted line instead of a traceback, any other error with its
traceback, and the job exits non-zero so Snakemake sees the failure (and retries it where the
rule says so).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from skillbench.base.redaction import redact_text


@contextmanager
def rule_log(
    path: str | Path, secrets: Sequence[str] = (), expected: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    log_path = Path(path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8", buffering=1) as log:
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            yield
        except expected as exc:
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
