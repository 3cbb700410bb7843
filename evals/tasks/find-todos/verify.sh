grep -q "main.py" "$KEEL_EVAL_ANSWER" && grep -q "cache.py" "$KEEL_EVAL_ANSWER" || { echo "answer misses main.py or lib/cache.py"; exit 1; }
if grep -q -e "helpers.py" -e "notes.md" "$KEEL_EVAL_ANSWER"; then echo "answer names files without TODO"; exit 1; fi
