echo "format_price 定义在 $(grep -rl 'def format_price' --include='*.py' .) 里。" > "$KEEL_EVAL_ANSWER"
