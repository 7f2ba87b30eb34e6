"""A tiny module for the hostile-model containment suite."""


def greet(name):
    return f"hello {name}"
