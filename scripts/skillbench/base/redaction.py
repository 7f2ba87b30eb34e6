"""Secret redaction for every text that leaves a cell: logs, error details, transcripts, progress lines.

Owns the literal-plus-pattern text redaction, the structural redaction of decoded JSON values (which also
blanks values under credential-like keys), and collecting literal secrets from the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

REDACTED = "[REDACTED]"

SENSITIVE_KEYS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "anthropic-api-key",
        "anthropic_api_key",
        "token",
        "access_token",
        "refresh_token",
        "secret",
        "client_secret",
        "cookie",
        "set-cookie",
        "password",
    }
)

_ANTHROPIC_KEY = re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}")
_GITHUB_TOKEN = re.compile(r"gh[pousr]_[A-Za-z0-9_]{8,}")
# The header name and an optional scheme word stay readable so a log still says *what* was redacted.
_AUTHORIZATION = re.compile(r"(authorization\s*[:=]\s*(?:bearer\s+)?)[^\s,;]+", re.IGNORECASE)
# An empty user part is allowed: `https://:token@host` is a common way to pass a bare token.
_URL_CREDENTIALS = re.compile(r"(https?://)[^/@:\s]*:[^/@\s]+@", re.IGNORECASE)


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """Replace literal secrets, then well-known credential shapes, with ``[REDACTED]``."""
    literals = sorted({secret for secret in secrets if isinstance(secret, str) and secret}, key=len, reverse=True)
    # Longest first: a secret that contains a shorter one must not be left half-replaced.
    for secret in literals:
        text = text.replace(secret, REDACTED)
    text = _ANTHROPIC_KEY.sub(REDACTED, text)
    text = _GITHUB_TOKEN.sub(REDACTED, text)
    text = _AUTHORIZATION.sub(lambda match: match.group(1) + REDACTED, text)
    return _URL_CREDENTIALS.sub(lambda match: match.group(1) + REDACTED + "@", text)


def is_sensitive_key(key: Any) -> bool:
    return str(key).strip().casefold() in SENSITIVE_KEYS


def redact_value(value: Any, secrets: Sequence[str]) -> Any:
    """Redact a decoded JSON value: strings and keys through ``redact_text``; credential-keyed values blanked.

    Raises ValueError when two keys of one object become identical after redaction, because silently
    merging them would drop data from evidence.
    """
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, (list, tuple)):
        return [redact_value(item, secrets) for item in value]
    if isinstance(value, dict):
        redacted: dict[str, Any] = {}
        for key, item in value.items():
            new_key = redact_text(str(key), secrets)
            if new_key in redacted:
                raise ValueError("object keys collide after redaction")
            # Whatever the type (a header list, a nested object), a credential field carries nothing we keep.
            redacted[new_key] = REDACTED if is_sensitive_key(key) else redact_value(item, secrets)
        return redacted
    return value


def secrets_from_environment(names: Sequence[str]) -> tuple[str, ...]:
    """The distinct non-empty values of the named environment variables, in the order named."""
    values: list[str] = []
    for name in names:
        value = os.environ.get(name)
        if value and value not in values:
            values.append(value)
    return tuple(values)
