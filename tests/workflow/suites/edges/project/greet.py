"""A tiny module for the hostile-edges suite."""


def greet(name):
    return f"hello {name}"
