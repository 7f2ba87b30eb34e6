from double import double


def test_double_handles_negative_and_zero():
    assert double(-4) == -8
    assert double(0) == 0
