python3 -m unittest discover 2>&1 | grep '^Ran' > "$KEEL_EVAL_ANSWER"
