def count_words(text):
    return len([word for word in text.split(" ") if word])
