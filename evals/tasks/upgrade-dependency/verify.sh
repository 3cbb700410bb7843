want=$(sed 's/^requests==2.28.1$/requests==2.32.3/' "$TASK_DIR/files/requirements.txt")
[ "$(cat requirements.txt)" = "$want" ] || { echo "requirements.txt: $(diff <(echo "$want") requirements.txt)"; exit 1; }
cmp -s fetch.py "$TASK_DIR/files/fetch.py" || { echo "fetch.py was changed"; exit 1; }
