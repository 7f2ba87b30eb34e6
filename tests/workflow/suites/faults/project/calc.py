"""A tiny calculator module for the fault-injection suite."""


def add(a, b):
    return a + b
