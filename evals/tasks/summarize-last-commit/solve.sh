git show HEAD > "$KEEL_EVAL_ANSWER"
