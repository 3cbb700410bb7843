python3 - <<'PY' || exit 1
import sys
from textutil import reverse_words, shout, word_count
cases = {"one two three": "three two one", "a": "a", "hello   big world": "world big hello"}
for given, want in cases.items():
    got = reverse_words(given)
    if got != want:
        print(f"reverse_words({given!r}) = {got!r}, want {want!r}"); sys.exit(1)
assert shout("hi") == "HI!" and word_count("a b") == 2
PY
