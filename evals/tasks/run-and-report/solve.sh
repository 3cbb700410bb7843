python3 calc.py 6 7 > "$KEEL_EVAL_ANSWER"
