import calc


def test_add_is_callable():
    assert callable(calc.add)
