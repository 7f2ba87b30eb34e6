from textstats import word_count


def test_single_spaces():
    assert word_count("one two three") == 3
