grep -q "app.py" "$KEEL_EVAL_ANSWER" || { echo "answer does not name src/app.py"; exit 1; }
if grep -q -e "util.py" -e "README" "$KEEL_EVAL_ANSWER"; then echo "answer names unchanged files"; exit 1; fi
