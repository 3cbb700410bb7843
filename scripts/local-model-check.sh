#!/usr/bin/env bash
# Opt-in check against a real model: runs keel on three small tasks against an
# OpenAI-compatible server and reports how the model called tools (native tool-call
# field vs. calls written as text and recovered by keel) and its speed.
#
#   ../shared/local-llm/serve.sh 1.5b 8091      # start llama-server with Qwen2.5-Coder
#   scripts/local-model-check.sh http://127.0.0.1:8091/v1
set -euo pipefail
base=${1:-http://127.0.0.1:8091/v1}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p keel-cli --manifest-path "$root/Cargo.toml"
keel="$root/target/release/keel"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws/data"
printf '# Demo\nA tiny project. hello.py prints a greeting.\n' > "$work/ws/README.md"
printf 'print("hello from keel")\n' > "$work/ws/hello.py"
printf '3\n1\n4\n1\n5\n' > "$work/ws/data/numbers.txt"

tasks=(
  "Run hello.py with python3 and tell me what it prints."
  "List the files, then read README.md and summarize it in one sentence."
  "Write NOTES.md containing the sum of the numbers in data/numbers.txt."
)
for task in "${tasks[@]}"; do
  echo "== $task"
  start=$(date +%s.%N)
  KEEL_HOME="$work/home" "$keel" --json --provider llamacpp --base-url "$base" --max-steps 8 -C "$work/ws" "$task" \
    > "$work/out.jsonl" 2> "$work/err.txt" || true
  end=$(date +%s.%N)
  python3 - "$work/out.jsonl" "$start" "$end" <<'PY'
import json, sys
native = text = 0; results = []; done = None
for line in open(sys.argv[1]):
    event = json.loads(line)
    if event["type"] == "assistant/message":
        for block in event["data"]["content"]:
            if block["type"] == "tool_call":
                if block["id"].startswith("call_text_"): text += 1
                else: native += 1
    elif event["type"] == "tool/result":
        d = event["data"]; results.append(("error" if d.get("is_error") else "ok") + " " + d["name"])
    elif event["type"] == "keel/done":
        done = event["data"]
wall = float(sys.argv[3]) - float(sys.argv[2])
if done:
    u = done["usage"]
    print(f"  {done['reason']}: {done['steps']} steps, native calls {native}, text calls recovered {text}")
    print(f"  results: {', '.join(results) or 'none'}")
    print(f"  tokens {u['input_tokens']} in ({u.get('cached_tokens', 0)} cached) / {u['output_tokens']} out, {wall:.1f}s, {u['output_tokens']/wall:.1f} output tok/s overall")
    print(f"  answer: {done['final_text'][:200]!r}")
else:
    print("  no result; see stderr")
PY
done
