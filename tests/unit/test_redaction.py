"""Redaction: literal secrets, credential patterns, structural redaction of decoded JSON."""

from __future__ import annotations

import pytest
from skillbench.base.redaction import SENSITIVE_KEYS, redact_text, redact_value, secrets_from_environment


def test_literal_secrets_are_replaced_longest_first():
    text = "key=abcdef123 short=abc"
    assert redact_text(text, ["abc", "abcdef123"]) == "key=[REDACTED] short=[REDACTED]"


def test_empty_secrets_are_ignored():
    assert redact_text("nothing here", ["", ""]) == "nothing here"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-ant-api03-AbCd_EfGh-123 end", "key [REDACTED] end"),
        ("sk-ant-short", "sk-ant-short"),
        ("ghp_abcdefgh1234 gho_ABCDEFGH ghu_12345678 ghs_abc_defgh ghr_zzzzzzzz", " ".join(["[REDACTED]"] * 5)),
        ("ghx_abcdefgh1234", "ghx_abcdefgh1234"),
        ("Authorization: Bearer abc.def-123, next", "Authorization: Bearer [REDACTED], next"),
        ("authorization=xyz;rest", "authorization=[REDACTED];rest"),
        ("AUTHORIZATION :  token123", "AUTHORIZATION :  [REDACTED]"),
        ("clone https://user:pa55w0rd@example.com/repo.git", "clone https://[REDACTED]@example.com/repo.git"),
        ("http://bot:t0k@host", "http://[REDACTED]@host"),
        ("https://:t0ken@host", "https://[REDACTED]@host"),
        ("https://example.com/a:b@c", "https://example.com/a:b@c"),
    ],
)
def test_patterns(text, expected):
    assert redact_text(text, []) == expected


def test_redact_value_is_structural():
    canary = "CANARY-SECRET-42"
    value = {
        "X-Api-Key": {"nested": "anything"},
        "Authorization": ["Bearer a", "Bearer b"],
        "password": 12345,
        "headers": {" Cookie ": "session=1"},
        f"key-{canary}": "value",
        "text": f"the secret is {canary}",
        "items": [canary, 3, None, True, 1.5],
        "count": 7,
    }
    redacted = redact_value(value, [canary])
    assert redacted == {
        "X-Api-Key": "[REDACTED]",
        "Authorization": "[REDACTED]",
        "password": "[REDACTED]",
        "headers": {" Cookie ": "[REDACTED]"},
        "key-[REDACTED]": "value",
        "text": "the secret is [REDACTED]",
        "items": ["[REDACTED]", 3, None, True, 1.5],
        "count": 7,
    }
    assert value["text"].endswith(canary), "the input must not be mutated"


def test_redact_value_rejects_keys_that_collide_after_redaction():
    with pytest.raises(ValueError, match="collide"):
        redact_value({"a-SECRET1": 1, "a-SECRET2": 2}, ["SECRET1", "SECRET2"])


def test_sensitive_keys_are_casefolded_names():
    assert "x-api-key" in SENSITIVE_KEYS and "anthropic_api_key" in SENSITIVE_KEYS
    assert all(key == key.casefold() for key in SENSITIVE_KEYS)


def test_secrets_from_environment(monkeypatch):
    monkeypatch.setenv("SB_TEST_ONE", "first")
    monkeypatch.setenv("SB_TEST_EMPTY", "")
    monkeypatch.setenv("SB_TEST_TWO", "first")
    monkeypatch.delenv("SB_TEST_ABSENT", raising=False)
    assert secrets_from_environment(["SB_TEST_ONE", "SB_TEST_EMPTY", "SB_TEST_ABSENT", "SB_TEST_TWO"]) == ("first",)
