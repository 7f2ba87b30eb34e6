#!/bin/bash
cat > /app/wc.py <<'PY'
def count_words(text):
    return len(text.split())
PY
