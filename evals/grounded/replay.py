#!/usr/bin/env python3
"""Replays the small profile's grounded answers (keel_tools::grounded) from eval records.

The evidence selection and the prompt are rebuilt from each run's log as keel builds them;
`check` compares every rebuilt prompt with the one logged in the run's `model/aside`
(a mismatch means this copy drifted from grounded.rs: mend it first). `diff` lists the
answers whose prompt another selection would change; `ask` sends both prompts to a
llama-server (temperature 0.2, seed 1, as keel asks) and prints the logged reply and
the two new ones side by side.

  cd evals/results
  ../grounded/replay.py check LABEL...
  ../grounded/replay.py diff MAX_OUTPUTS MAX_CHARS LABEL...
  ../grounded/replay.py ask MAX_OUTPUTS MAX_CHARS LABEL/TASK.1.jsonl... [--url URL]
"""
import glob
import json
import sys
import urllib.request

# As in grounded.rs.
MAX_OUTPUTS, MAX_EVIDENCE_CHARS, MAX_OUTPUT_CHARS = 8, 6000, 2000
SYSTEM = "You are a helpful coding assistant."


def describe(call):
    try:
        args = json.loads(call["arguments"])
    except ValueError:
        args = None
    if call["name"] == "shell" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return "`" + args["command"][:200] + "`"
    return call["name"] + " " + call["arguments"][:200]


def fence_for(texts):
    n = 3
    while any("`" * n in t for t in texts):
        n += 1
    return "`" * n


# What keel asks after the task (keel_tools::grounded::prompt).
CLOSING = " Answer from the output above, briefly; quote it exactly."


def prompt(evidence, task):
    fence = fence_for([t for _, t in evidence])
    text = "".join(f"{h}:\n{fence}\n{t.rstrip()}\n{fence}\n\n" for h, t in evidence)
    return text + task.strip() + CLOSING


def evidence(results, environment, max_outputs, max_chars):
    outputs, total = [], 0
    for call, content in reversed(results):
        if call["name"] == "answer" or len(outputs) == max_outputs:
            continue
        heading, text = "Output of " + describe(call), content[:MAX_OUTPUT_CHARS]
        if (heading, text) in outputs or total + len(text) > max_chars:
            continue
        outputs.append((heading, text))
        total += len(text)
    if environment is not None:
        outputs.append(("The project", environment))
    return outputs[::-1]


def answers(path):
    """Each grounded answer of a run: (task, environment, the turn's results, aside)."""
    environment, task, calls, results = None, None, {}, []
    for line in open(path):
        event = json.loads(line)
        kind, data = event["type"], event.get("data", {})
        if kind == "user/message":
            text = data.get("text", "")
            if environment is None and "<environment>" in text:
                start = text.find("<environment>") + len("<environment>")
                environment = text[start : text.find("</environment>")].strip()
            if data.get("source") is None:
                task, results = text, []
        elif kind == "assistant/message":
            for block in data.get("content", []):
                if block.get("type") == "tool_call":
                    calls[block["id"]] = block
        elif kind == "tool/result" and data.get("call_id") in calls:
            results.append((calls[data["call_id"]], data.get("content", "")))
        elif kind == "model/aside" and data.get("purpose") == "answer":
            yield task, environment, list(results), data


def ask(url, text, temperature=0.2, seed=1, max_tokens=400):
    """A plain request as keel_tools::plain sends it (one user message, no tools)."""
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
            "temperature": temperature, "seed": seed, "max_tokens": max_tokens}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request, timeout=300))["choices"][0]["message"]["content"]


def main(argv):
    url = "http://127.0.0.1:8091"
    if "--url" in argv:
        i = argv.index("--url")
        url = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    command, rest = argv[0], argv[1:]
    if command == "check":
        for label in rest:
            ok = bad = 0
            for path in sorted(glob.glob(f"{label}/*.jsonl")):
                for task, env, results, aside in answers(path):
                    if prompt(evidence(results, env, MAX_OUTPUTS, MAX_EVIDENCE_CHARS), task) == aside["prompt"]:
                        ok += 1
                    else:
                        bad += 1
                        print("mismatch", path)
            print(label, "same", ok, "different", bad)
        return
    limits, targets = (int(rest[0]), int(rest[1])), rest[2:]
    for target in targets:
        paths = [target] if target.endswith(".jsonl") else sorted(glob.glob(f"{target}/*.jsonl"))
        for path in paths:
            for task, env, results, aside in answers(path):
                now = prompt(evidence(results, env, MAX_OUTPUTS, MAX_EVIDENCE_CHARS), task)
                other = prompt(evidence(results, env, *limits), task)
                if now == other:
                    continue
                logged = "".join(b.get("text", "") for b in aside["reply"]["content"])
                print("==", path, "|", task.strip()[:80])
                if command == "ask":
                    print("  logged:", logged[:200].replace("\n", "\\n"))
                    print("  now   :", ask(url, now)[:200].replace("\n", "\\n"))
                    print("  other :", ask(url, other)[:200].replace("\n", "\\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
