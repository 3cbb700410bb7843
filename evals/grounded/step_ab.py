#!/usr/bin/env python3
"""A/B a tool result's wording: ask the model again at the step right after it.

    python3 evals/grounded/step_ab.py OLD_TEXT NEW_TEXT [--seeds 1,2,3] [--url URL] [--exclude TEXT] [--show]

Finds, in every recorded run under evals/results/*/*.jsonl, the first tool result that
contains OLD_TEXT (and not --exclude), rebuilds the conversation up to it (the system
prompt and tools of the run's request/header, the user messages, the calls and
results), and asks a llama-server (started with --jinja) for the next call with that
result as recorded and with OLD_TEXT replaced by NEW_TEXT, a few seeds each, at the
server's temperature 0.8 as keel leaves it. The reply opens with `<tool_call>` and a
call object, as keel's call grammar forces. Prints, per distinct point, what came next
(the tool's name; `git init`, other git commands; `SAME <tool>` for the call just
made again) and a tally per wording. A wording is worth a suite run when it moves the
tally; the suite decides.
"""
import argparse, collections, glob, json, os, re, urllib.request

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results")
GRAMMAR = 'root ::= "{\\"name\\": \\"" [a-z_]+ "\\", \\"arguments\\": {" [^\\n]* "}}"'


def post(url, path, body):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.load(reply)


def points(old, exclude):
    """(run file, request header, messages up to the first result holding `old`)."""
    for path in sorted(glob.glob(os.path.join(RESULTS, "*", "*.jsonl"))):
        events = [json.loads(line) for line in open(path)]
        header = next((e["data"] for e in events if e["type"] == "request/header"), None)
        if not header:
            continue
        messages = []
        for event in events:
            kind, data = event["type"], event["data"]
            if kind == "user/message":
                messages.append({"role": "user", "content": data["text"]})
            elif kind == "assistant/message":
                text = "".join(c.get("text", "") for c in data["content"] if c["type"] == "text")
                calls = [{"type": "function", "id": c["id"],
                          "function": {"name": c["name"], "arguments": c["arguments"]}}
                         for c in data["content"] if c["type"] == "tool_call"]
                messages.append({"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})})
            elif kind == "tool/result":
                messages.append({"role": "tool", "tool_call_id": data["call_id"], "content": data["content"]})
                if old in data["content"] and not (exclude and exclude in data["content"]):
                    yield path, header, messages
                    break


def ask(url, header, messages, old, new, seed):
    messages = [dict(m) for m in messages]
    messages[-1]["content"] = messages[-1]["content"].replace(old, new)
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["parameters"]}} for t in header["tools"]]
    full = [{"role": "system", "content": header["system_prompt"]}] + messages
    prompt = post(url, "/apply-template", {"messages": full, "tools": tools})["prompt"]
    # keel mends Qwen's template, which shows the call's shape with doubled braces.
    prompt = prompt.replace('{{"name": <function-name>, "arguments": <args-json-object>}}',
                            '{"name": <function-name>, "arguments": <args-json-object>}')
    reply = post(url, "/completion", {"prompt": prompt + "<tool_call>\n", "temperature": 0.8, "seed": seed,
                                      "n_predict": 200, "cache_prompt": True, "grammar": GRAMMAR})
    return reply["content"]


def kind(text, last_call):
    name = re.search(r'"name":\s*"(\w+)"', text)
    name = name.group(1) if name else "text"
    try:
        call = json.loads(text)
        if call.get("name") == last_call["name"] and call.get("arguments") == json.loads(last_call["arguments"]):
            return "SAME " + name
    except (ValueError, AttributeError):
        pass
    if "git init" in text:
        return "git init"
    command = re.search(r'"command":\s*"\s*(\w+)', text)
    if name == "shell" and command and command.group(1) == "git":
        return "git other"
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--url", default="http://127.0.0.1:8091")
    parser.add_argument("--exclude", default=None)
    parser.add_argument("--show", action="store_true", help="print each reply, not only its kind")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    found = list(points(args.old, args.exclude))
    distinct, seen = [], set()
    for point in found:
        key = json.dumps(point[2][-3:])
        if key not in seen:
            seen.add(key)
            distinct.append(point)
    print(f"{len(found)} points, {len(distinct)} distinct", flush=True)
    tally = {"old": collections.Counter(), "new": collections.Counter()}
    for path, header, messages in distinct:
        last_call = next(m for m in reversed(messages) if m.get("tool_calls"))["tool_calls"][0]["function"]
        row = {}
        for name, text in (("old", args.old), ("new", args.new)):
            replies = [ask(args.url, header, messages, args.old, text, s) for s in seeds]
            row[name] = [kind(reply, last_call) for reply in replies]
            if args.show:
                for reply in replies:
                    print(f"  {name}: {reply.strip()[:300]}")
            tally[name].update(row[name])
        print(os.path.relpath(path, RESULTS), json.dumps(row), flush=True)
    for name, counts in tally.items():
        print(name, dict(counts.most_common()))


if __name__ == "__main__":
    main()
