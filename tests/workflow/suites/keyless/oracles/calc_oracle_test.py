# The hidden oracle of the keyless suite: fails until `add` really adds.
from calc import add


def test_add_adds():
    assert add(2, 2) == 4
    assert add(-1, 5) == 4
