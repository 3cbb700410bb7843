[ "$(python3 greet.py --name Bo --shout 2>&1)" = "HELLO, BO!" ] || { echo "--shout prints: $(python3 greet.py --name Bo --shout 2>&1)"; exit 1; }
[ "$(python3 greet.py --name Bo 2>&1)" = "Hello, Bo!" ] || { echo "without --shout: $(python3 greet.py --name Bo 2>&1)"; exit 1; }
