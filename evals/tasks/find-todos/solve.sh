grep -rl TODO . | sed 's|^\./||' > "$KEEL_EVAL_ANSWER"
