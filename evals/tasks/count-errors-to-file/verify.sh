[ -f error_count.txt ] || { echo "no error_count.txt"; exit 1; }
[ "$(tr -d ' \t\r\n' < error_count.txt)" = 11 ] || { echo "error_count.txt: $(head -c 100 error_count.txt)"; exit 1; }
grep -qw "11" "$KEEL_EVAL_ANSWER" || { echo "answer does not say 11"; exit 1; }
cmp -s server.log "$TASK_DIR/files/server.log" || { echo "server.log was changed"; exit 1; }
