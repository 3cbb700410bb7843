python3 leaderboard.py > "$KEEL_EVAL_ANSWER"
