"""Small text statistics."""


def word_count(text):
    """The number of words in text."""
    return len(text.split())


def average_word_length(text):
    """The mean length of the words in text (0.0 for no words)."""
    words = text.split()
    if not words:
        return 0.0
    total = 0
    for word in words:
        total += len(word)
    return total / len(words)
