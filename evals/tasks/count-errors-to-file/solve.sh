grep -c ' ERROR ' server.log > error_count.txt
echo "There are $(cat error_count.txt) ERROR lines; I saved the number in error_count.txt." > "$KEEL_EVAL_ANSWER"
