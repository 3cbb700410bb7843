grep -q "feature/login-form" "$KEEL_EVAL_ANSWER" || { echo "answer does not name feature/login-form"; exit 1; }
