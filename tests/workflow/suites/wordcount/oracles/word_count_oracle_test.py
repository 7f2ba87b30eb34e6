from textstats import word_count


def test_runs_of_spaces_padding_and_empty_text():
    assert word_count("one  two   three") == 3
    assert word_count("  padded  ") == 1
    assert word_count("") == 0
