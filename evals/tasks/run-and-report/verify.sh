grep -q "product=42" "$KEEL_EVAL_ANSWER" && grep -q "checksum=14" "$KEEL_EVAL_ANSWER" || { echo "answer lacks product=42 checksum=14"; exit 1; }
