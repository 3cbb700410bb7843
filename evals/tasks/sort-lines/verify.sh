[ "$(cat names.txt)" = "$(printf 'alice\nbob\ncarol\neve\nmallory\ntrent')" ] || { echo "names.txt: $(cat names.txt | tr '\n' ' ')"; exit 1; }
