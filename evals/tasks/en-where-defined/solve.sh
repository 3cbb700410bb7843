echo "slugify is defined in $(grep -rl 'def slugify' --include='*.py' .)." > "$KEEL_EVAL_ANSWER"
