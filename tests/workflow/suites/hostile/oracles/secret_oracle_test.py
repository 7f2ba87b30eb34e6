# ORACLE-CANARY-5f1c9e2a: this string must never reach a session, setup or verify.
from greet import greet


def test_greet_is_polite():
    assert greet("bob") == "hello bob"
