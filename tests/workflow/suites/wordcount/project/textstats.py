"""Small text statistics."""


def word_count(text):
    """The number of words in text."""
    return text.count(" ") + 1
