test -f total.txt || { echo "total.txt missing"; exit 1; }
[ "$(tr -d ' \n\r' < total.txt)" = "172" ] || { echo "total.txt holds: $(cat total.txt)"; exit 1; }
