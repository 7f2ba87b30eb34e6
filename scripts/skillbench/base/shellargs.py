"""The values a `shell:` rule hands its shim on the command line: params and resources written as `{name!r:q}`
(their Python literals, the same repr Snakemake records to decide reruns) and read back here."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any


def literal(text: str, name: str) -> Any:
    """The value of one `{name!r:q}` argument, read without running anything."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(
            f"argument {name}: {text[:80]!r} is not a Python literal ({exc}); a param or resource a shell step is "
            "handed must hold only strings, numbers, booleans, None, lists and dicts"
        ) from None


def literals(pairs: Iterable[str], name: str) -> dict[str, Any]:
    """`key=<literal>` arguments (`key={resources.key!r:q}` in the rule) as a dict."""
    values = {}
    for pair in pairs:
        key, separator, text = pair.partition("=")
        if not separator or not key:
            raise ValueError(f"argument {name}: {pair!r} is not key=value")
        values[key] = literal(text, f"{name} {key}")
    return values
