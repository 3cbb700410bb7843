python3 - <<'PY' || exit 1
import configparser, sys
c = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
c.read("config.ini")
if c.get("client", "max_retries", fallback=None) != "5":
    print("client.max_retries is", c.get("client", "max_retries", fallback=None)); sys.exit(1)
PY
[ "$(grep -c 'retries' config.ini)" = 1 ] || { echo "retries lines: $(grep retries config.ini)"; exit 1; }
[ "$(grep -v '^max_retries' config.ini)" = "$(grep -v '^max_retries' "$TASK_DIR/files/config.ini")" ] || { echo "other lines changed: $(diff "$TASK_DIR/files/config.ini" config.ini)"; exit 1; }
