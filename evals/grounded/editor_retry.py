#!/usr/bin/env python3
"""Replays change_file's second editor attempt on recorded refusals for a parse error.

For every change_file call in the given run records whose two editor replies were both
refused because the file would not parse with them, the second request is sent again to
a llama-server twice: as it was (the first prompt, temperature 0.7) and with the note
keel_tools::change now adds ("With your earlier reply `F` would not parse (PROBLEM).
Reply with the complete new content of `F` in one code block, making the change in a
way that parses."). Each reply is judged by whether its code block parses (Python's
`compile`, JSON) and differs from the file. A note that parses more often and keeps
the change is worth the live run.

  cd evals/results
  ../grounded/editor_retry.py LABEL... [--url URL] [--seeds N]
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay  # noqa: E402


def ask(url, text, temperature, seed):
    return replay.ask(url, text, temperature, seed, max_tokens=2000)


def block(reply):
    lines = reply.split("\n")
    opens = [i for i, line in enumerate(lines) if line.strip().startswith("```")]
    if len(opens) < 2:
        return None
    return "\n".join(lines[opens[0] + 1:opens[1]]) + "\n"


def parses(path, text):
    try:
        if path.endswith(".json"):
            json.loads(text)
        else:
            compile(text, path, "exec")
        return True
    except (ValueError, SyntaxError):
        return False


def refusals(path):
    """(file path, first prompt, old content, problem) of each call refused for parsing."""
    pending = []
    for line in open(path):
        event = json.loads(line)
        kind, data = event["type"], event.get("data", {})
        if kind == "model/aside" and data.get("purpose") == "change_file":
            pending.append(data)
        elif kind == "tool/result" and data.get("name") == "change_file":
            asides, pending = pending, []
            message = data.get("content", "")
            found = re.search(r"it parses now, and with this change it would not \((.*)\)\. Correct your text",
                              message, re.S)
            if len(asides) != 2 or not data.get("is_error") or not found:
                continue
            prompt = asides[0]["prompt"]
            shown = re.search(r"\nThis is `([^`]*)`:\n(`{3,})\n(.*?)\2\nReply with the complete new content",
                              prompt, re.S)
            if shown:
                yield shown.group(1), prompt, shown.group(3), found.group(1)


def main(argv):
    url = "http://127.0.0.1:8091"
    if "--url" in argv:
        i = argv.index("--url")
        url, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    seeds = 1
    if "--seeds" in argv:
        i = argv.index("--seeds")
        seeds, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    tally = {"as before": [0, 0], "with the note": [0, 0]}
    seen = set()
    for label in argv:
        for path in sorted(glob.glob(f"{label}/*.jsonl")):
            for name, prompt, old, problem in refusals(path):
                if (prompt, problem) in seen:
                    continue
                seen.add((prompt, problem))
                note = (f"\n\nWith your earlier reply `{name}` would not parse ({problem}). Reply with the "
                        f"complete new content of `{name}` in one code block, making the change in a way that parses.")
                print("==", path, name, "|", problem[:100])
                for way, text in (("as before", prompt), ("with the note", prompt + note)):
                    for seed in range(1, seeds + 1):
                        new = block(ask(url, text, 0.7, seed))
                        good = new is not None and new != old and parses(name, new)
                        tally[way][0] += good
                        tally[way][1] += 1
                        print(f"   {way:14} seed {seed}: {'parses, changed' if good else 'refused'}", flush=True)
    for way, (good, of) in tally.items():
        print(f"{way:14} {good}/{of} would be written")


if __name__ == "__main__":
    main(sys.argv[1:])
