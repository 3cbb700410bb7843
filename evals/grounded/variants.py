#!/usr/bin/env python3
"""Scores other ways of writing the grounded answer's prompt on recorded turns.

For every grounded answer (keel_tools::grounded) in the given run records of tasks that
only want an answer, the prompt is rebuilt as keel builds it (`now`) and as each variant
below builds it; each is sent to a llama-server (temperature 0.2, seed 1, as keel asks),
and the reply is judged by the task's own verify.sh in a fresh workspace (files/ and
setup.sh, as keel-evals prepares one). Prints, per task and in all, how many replies
passed for the logged reply and each variant. A variant that helps tasks of one kind and
hurts none is worth a live run; a variant is a general change to how evidence is shown,
never a rule for one task's wording.

  cd evals/results
  ../grounded/variants.py LABEL... [--url URL] [--tasks a,b] [--variants a,b] [--seeds N]

With --seeds N every prompt is asked N times (seeds 1..N) and each reply judged: one draw
per recorded answer is noisy.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay  # noqa: E402

TASKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "keel eval", "GIT_AUTHOR_EMAIL": "eval@keel.invalid",
                "GIT_COMMITTER_NAME": "keel eval", "GIT_COMMITTER_EMAIL": "eval@keel.invalid"}


def counted(evidence):
    """Each output's heading says how many lines it has."""
    out = []
    for heading, text in evidence:
        if heading.startswith("Output of"):
            lines = len(text.rstrip("\n").split("\n")) if text.strip() else 0
            heading = f"{heading} ({lines} lines)"
        out.append((heading, text))
    return out


def asked(closing):
    """keel's prompt with another closing request after the task."""
    def build(ev, task, _files):
        text = replay.prompt(ev, task)
        return text[: -len(replay.CLOSING)] + closing
    return build


MAX_NAMED_CHARS = 2000


def named(evidence, files):
    """The evidence, then each small project file an output names (a word that is the
    path of a file in `files`, the task's starting files) that no read_file output
    showed: a cause one reference away (uploader.py reads "settings.json")."""
    shown = set()
    for heading, _ in evidence:
        if heading.startswith("Output of read_file"):
            try:
                shown.add(json.loads(heading[len("Output of read_file "):]).get("path", "").lstrip("./"))
            except ValueError:
                pass
    extra = []
    for heading, text in evidence:
        if not heading.startswith("Output of"):
            continue
        for word in re.split(r"[\s`'\"(),;:<>\[\]{}]+", text):
            word = word.rstrip(".!?").lstrip("./")
            path = os.path.join(files, word)
            if ("." not in word or word in shown or not os.path.isfile(path)
                    or os.path.getsize(path) > MAX_NAMED_CHARS):
                continue
            shown.add(word)
            with open(path, encoding="utf-8", errors="replace") as f:
                extra.append((f"Content of `{word}`", f.read()))
    return evidence + extra[:2]


VARIANTS = {
    "now": lambda ev, task, _files: replay.prompt(ev, task),
    "counted": lambda ev, task, _files: replay.prompt(counted(ev), task),
    "nobrief": asked(" Answer from the output above; quote it exactly."),
    "lines": asked(" Answer from the output above: quote exactly every line of it that answers this."),
    "named": lambda ev, task, files: replay.prompt(named(ev, files), task),
    # The question before the outputs as well as after: read with it in mind.
    "first": lambda ev, task, _files: f"The question: {task.strip()}\n\n" + replay.prompt(ev, task),
    "whole": asked(" Answer from the output above, briefly; quote it exactly, and leave out nothing of it that answers this."),
}


def verdict(task_name, reply):
    """Whether verify.sh passes with `reply` as keel's answer, in a fresh workspace."""
    task_dir = os.path.join(TASKS_DIR, task_name)
    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "ws")
        files = os.path.join(task_dir, "files")
        if os.path.isdir(files):
            shutil.copytree(files, ws, symlinks=True)
        else:
            os.makedirs(ws)
        env = dict(os.environ, TASK_DIR=task_dir, **GIT_IDENTITY)
        if os.path.isfile(os.path.join(task_dir, "setup.sh")):
            subprocess.run(["bash", os.path.join(task_dir, "setup.sh")], cwd=ws, env=env,
                           capture_output=True, check=True)
        answer = os.path.join(tmp, "answer.txt")
        with open(answer, "w") as f:
            f.write(reply)
        env["KEEL_EVAL_ANSWER"] = answer
        done = subprocess.run(["bash", os.path.join(task_dir, "verify.sh")], cwd=ws, env=env,
                              capture_output=True)
        return done.returncode == 0


def wants_answer(path):
    for line in open(path):
        event = json.loads(line)
        if event["type"] == "turn/intent":
            return event.get("data", {}).get("wants") == "answer"
    return False


def main(argv):
    url = "http://127.0.0.1:8091"
    only = None
    if "--url" in argv:
        i = argv.index("--url")
        url, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    if "--tasks" in argv:
        i = argv.index("--tasks")
        only, argv = set(argv[i + 1].split(",")), argv[:i] + argv[i + 2:]
    seeds = 1
    if "--seeds" in argv:
        i = argv.index("--seeds")
        seeds, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    chosen = dict(VARIANTS)
    if "--variants" in argv:
        i = argv.index("--variants")
        names, argv = argv[i + 1].split(","), argv[:i] + argv[i + 2:]
        chosen = {name: VARIANTS[name] for name in names}
    tally = collections.defaultdict(lambda: collections.Counter())
    for label in argv:
        for name in sorted(os.listdir(label)):
            if not name.endswith(".jsonl"):
                continue
            task_name = name.split(".")[0]
            path = os.path.join(label, name)
            if (only and task_name not in only) or not wants_answer(path):
                continue
            for task, env, results, aside in replay.answers(path):
                ev = replay.evidence(results, env, replay.MAX_OUTPUTS, replay.MAX_EVIDENCE_CHARS)
                logged = "".join(b.get("text", "") for b in aside["reply"]["content"])
                row = {"logged": verdict(task_name, logged)}
                for variant, build in chosen.items():
                    row[variant] = 0
                    for seed in range(1, seeds + 1):
                        files = os.path.join(TASKS_DIR, task_name, "files")
                        reply = replay.ask(url, build(ev, task, files), seed=seed)
                        passed = verdict(task_name, reply)
                        row[variant] += passed
                        print(f"  {variant:8} {'pass' if passed else 'FAIL'} {reply[:120]!r}")
                print(path, row, flush=True)
                for key, passed in row.items():
                    tally[task_name][key] += passed
                tally[task_name]["records"] += 1
    total = collections.Counter()
    for task_name, counts in sorted(tally.items()):
        print(f"{task_name:24}", dict(counts))
        total.update(counts)
    print("all".ljust(24), dict(total))


if __name__ == "__main__":
    main(sys.argv[1:])
