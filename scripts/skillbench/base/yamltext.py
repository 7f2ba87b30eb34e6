"""YAML text to Python values, the one way the library parses YAML.

libyaml's parser (PyYAML's CSafeLoader) when PyYAML was built with it: a cell job parses its scripted model and
the Snakefile its suite, and the pure-Python parser spends most of a second on a large one. Malformed text is
parsed again by the pure parser, whose messages (line, column, what was expected) are the ones users read.
"""

from __future__ import annotations

from typing import Any

import yaml

_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """The document in ``text`` with safe tags only; raises ``yaml.YAMLError`` with the pure parser's message."""
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        return yaml.safe_load(text)
