git branch --show-current > "$KEEL_EVAL_ANSWER"
