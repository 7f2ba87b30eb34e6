from wc import count_words


def test_tabs_and_newlines_separate_words():
    assert count_words("a\tb\nc") == 3


def test_runs_of_spaces_are_one_separator():
    assert count_words("  two   words ") == 2
