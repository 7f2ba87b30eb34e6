"""The base of every error the library raises on purpose.

`SkillbenchError` marks a failure whose message is the whole story: bad input, a refused
artifact, an unmet precondition, a failed step the user can act on. Its message names the file,
field or step and the fix, so a caller (a rule's log, the `skillbench` command) can show that one
line and stop, where any other exception is a bug that wants its traceback. Each module's error
class derives from it; one that callers also catch as a builtin (`ValueError`, `RuntimeError`)
keeps that builtin as a second base.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class SkillbenchError(Exception):
    """A failure the library expected and explained in its message (no traceback needed)."""


@contextmanager
def raised_as(error: type[Exception], *caught: type[Exception]) -> Iterator[None]:
    """Let a lower layer's `caught` errors leave as `error` with the same message, for callers that catch `error`."""
    try:
        yield
    except caught as exc:
        raise error(str(exc)) from exc
