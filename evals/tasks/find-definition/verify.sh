grep -q "codec.py" "$KEEL_EVAL_ANSWER" || { echo "answer does not name src/net/codec.py"; exit 1; }
