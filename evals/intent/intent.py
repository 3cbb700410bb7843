#!/usr/bin/env python3
"""How well a model reads what a task wants, by each way of asking keel has tried.

    python3 evals/intent/intent.py run evals/intent/heldout.tsv out.jsonl [URL]
    python3 evals/intent/intent.py score out.jsonl

`run` asks a llama-server (started with --jinja; default http://127.0.0.1:8092) the
`classify` question of keel_agent::intent for every labelled request of the file (a
tab-separated line: change|answer|both, whether it names a check (yes|no|-), the
request), in four ways: o1 (change first), o2 (question first), s1 and s2 (the same
orders after a `request` field that restates it). The call is rendered with the model's
template from the server and constrained by a grammar, at temperature 0, as keel's
templated route does; the probabilities of true and false at each answer are kept too.
`score` counts, for each way and pair of ways that must agree, the readings that were
right, unknown and wrong. The prompt text below must follow keel_agent::intent's.
"""
import json, math, sys, urllib.request

# One string per line: keel-agent's intent tests find each of them here as it is there.
SYSTEM = "You read a request that a user wrote to a coding assistant working in a project folder, and classify it by calling `classify`. You do not carry out the request."
QUESTIONS = {
    "change": "true when doing what the request asks changes the project: a file edited, created, deleted or renamed, a commit, an install (also when it is asked politely, as a question)",
    "question": "true when the request asks for information the user wants to be told in the reply",
    "check": "true when the request asks to run tests, a script or a command to check the result",
    "layout": "true when the request asks to add, remove or change blank (empty) lines, spaces, indentation or line endings",
}
RESTATEMENT = ("request", "the request in a few English words")
O1 = ["change", "question", "check", "layout"]
O2 = ["question", "change", "check", "layout"]
WAYS = {"o1": (O1, False), "o2": (O2, False), "s1": (O1, True), "s2": (O2, True)}


def post(url, path, body):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as reply:
        return json.load(reply)


def classify(url, task, order, restated):
    fields = ([RESTATEMENT[0]] if restated else []) + order
    properties = {k: {"type": "boolean", "description": QUESTIONS[k]} for k in order}
    if restated:
        properties = {RESTATEMENT[0]: {"type": "string", "description": RESTATEMENT[1]}, **properties}
    tool = {"type": "function", "function": {"name": "classify", "description": "Classify the request.",
            "parameters": {"type": "object", "properties": properties, "required": fields}}}
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"The request:\n<<<\n{task}\n>>>\n\nClassify it."}]
    prompt = post(url, "/apply-template", {"messages": messages, "tools": [tool]})["prompt"]
    # keel mends Qwen's template, which shows the call's shape with doubled braces.
    prompt = prompt.replace('{{"name": <function-name>, "arguments": <args-json-object>}}',
                            '{"name": <function-name>, "arguments": <args-json-object>}')
    parts = ' ", " '.join(f'"\\"{k}\\": " ' + ("text" if k == RESTATEMENT[0] else "bool") for k in fields)
    grammar = ('root ::= "<tool_call>\\n{\\"name\\": \\"classify\\", \\"arguments\\": {" ' + parts
               + ' "}}\\n</tool_call>"\nbool ::= "true" | "false"\ntext ::= "\\"" [^"\\\\\\n]{1,80} "\\""\n')
    reply = post(url, "/completion", {"prompt": prompt, "grammar": grammar, "temperature": 0, "n_predict": 120,
                                      "n_probs": 10, "cache_prompt": True})
    text = reply["content"]
    arguments = json.loads(text[text.index("{"):text.rindex("}") + 1])["arguments"]
    odds, keys = {}, iter(order)
    for step in reply.get("completion_probabilities", []):
        if step["token"].strip() not in ("true", "false"):
            continue
        logprob = {}
        for top in step["top_logprobs"]:
            logprob.setdefault(top["token"].strip(), top["logprob"])
        key = next(keys, None)
        if key is None:
            break
        odds[key] = 1 / (1 + math.exp(logprob.get("false", -30) - logprob.get("true", -30)))
    return arguments, odds


def run(path, out, url):
    with open(out, "a") as sink:
        for line in open(path):
            if not line.strip():
                continue
            want, check, task = line.rstrip("\n").split("\t")
            record = {"want": want, "check": check, "task": task}
            for name, (order, restated) in WAYS.items():
                record[name], record[name + "p"] = classify(url, task, order, restated)
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()


def wants(reading, unchanged_answers=False):
    """What a reading says the request wants; with `unchanged_answers`, a request that
    changes nothing wants an answer whatever `question` says (keel since 2026-12-08)."""
    pair = (reading.get("change"), reading.get("question"))
    if unchanged_answers and pair in ((False, False), (False, True)):
        return "answer"
    return {(True, False): "change", (False, True): "answer", (True, True): "both"}.get(pair)


def score(path):
    records = [json.loads(line) for line in open(path)]
    tally = {}
    for r in records:
        said = {name: wants(r[name]) for name in WAYS}
        for a, b in [("o1", "o2"), ("o1", "s2"), ("s1", "s2")]:
            said[f"{a}+{b}"] = said[a] if said[a] == said[b] else None
        a, b = wants(r["o1"], True), wants(r["s2"], True)
        said["o1+s2, no change = answer"] = a if a == b else None
        odds = lambda k: (r["o1p"][k] + r["o2p"][k]) / 2
        said["o1,o2 mean odds"] = wants({"change": odds("change") > 0.5, "question": odds("question") > 0.5})
        for name, value in said.items():
            right, unknown, wrong = tally.setdefault(name, [0, 0, 0])
            tally[name] = [right + (value == r["want"]), unknown + (value is None),
                           wrong + (value is not None and value != r["want"])]
    print(f"{len(records)} requests: right / unknown / wrong")
    for name, (right, unknown, wrong) in tally.items():
        print(f"  {name:18} {right:3} {unknown:3} {wrong:3}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "http://127.0.0.1:8092")
    elif len(sys.argv) == 3 and sys.argv[1] == "score":
        score(sys.argv[2])
    else:
        sys.exit(__doc__)
