"""A tiny module for the keyless suite: `add` subtracts until an agent fixes it."""


def add(a, b):
    return a - b
