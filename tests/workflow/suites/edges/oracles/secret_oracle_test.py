# EDGE-ORACLE-CANARY-71d0c3: this oracle must never reach the proposer or a skill overlay.
from greet import greet


def test_greet_keeps_the_name_exactly():
    assert greet("Ada Lovelace") == "hello Ada Lovelace"
    assert greet("  spaced  ") == "hello   spaced  "


def test_greet_handles_the_empty_name():
    assert greet("") == "hello "
