python3 - <<'PY' || exit 1
import sys
want = ["Release checklist, March", "", "Before the freeze:", "- merge the parser rewrite",
        "- update the screenshots", "", "Release day:", "- tag v2.0 and push the tag", "- publish the packages", "",
        "After:", "- announce on the mailing list", "- close the milestone"]
text = open("todo.txt", encoding="utf-8").read()
lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
if lines != want:
    print("todo.txt is now:", lines); sys.exit(1)
PY
