grep -qw "37" "$KEEL_EVAL_ANSWER" || { echo "answer does not say 37"; exit 1; }
