echo "There are $(($(wc -l < sales.csv) - 1)) data rows." > "$KEEL_EVAL_ANSWER"
