echo "src/net/codec.py" > "$KEEL_EVAL_ANSWER"
