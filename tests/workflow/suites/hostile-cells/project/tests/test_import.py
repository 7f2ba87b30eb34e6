import calc


def test_imports():
    assert callable(calc.add)
