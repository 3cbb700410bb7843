printf '\n\ndef reverse_words(text):\n    return " ".join(reversed(text.split()))\n' >> textutil.py
