#!/usr/bin/env python3
"""A/B a system-prompt wording at a step of recorded runs of given tasks.

    python3 evals/grounded/prompt_ab.py OLD NEW TASK[,TASK] [--seeds 1,2,3] [--at TEXT] [--runs GLOB]

For each recorded run of the tasks (evals/results/GLOB/TASK.*.jsonl) whose system prompt
holds OLD, rebuilds the conversation up to a step and asks the llama-server for the next
call with the system prompt as recorded and with OLD replaced by NEW (as step_ab.py
does for a tool result). Without --at the step is the first (after the user messages);
with --at, right after the first tool result containing TEXT. Prints each reply.
"""
import argparse, glob, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_ab
p = argparse.ArgumentParser()
p.add_argument('old'); p.add_argument('new'); p.add_argument('tasks')
p.add_argument('--seeds', default='1,2,3')
p.add_argument('--at', default=None)
p.add_argument('--runs', default='*')
a = p.parse_args()
seeds = [int(s) for s in a.seeds.split(',')]
seen = set()

def conversation(events, at):
    messages = []
    for e in events:
        kind, data = e['type'], e['data']
        if kind == 'user/message':
            messages.append({'role': 'user', 'content': data['text']})
            if at is None and len(messages) == 2:
                return messages
        elif kind == 'assistant/message':
            text = ''.join(c.get('text', '') for c in data['content'] if c['type'] == 'text')
            calls = [{'type': 'function', 'id': c['id'], 'function': {'name': c['name'], 'arguments': c['arguments']}}
                     for c in data['content'] if c['type'] == 'tool_call']
            messages.append({'role': 'assistant', 'content': text, **({'tool_calls': calls} if calls else {})})
        elif kind == 'tool/result':
            messages.append({'role': 'tool', 'tool_call_id': data['call_id'], 'content': data['content']})
            if at is not None and at in data['content']:
                return messages
    return None

for task in a.tasks.split(','):
    for path in sorted(glob.glob(os.path.join(step_ab.RESULTS, a.runs, f'{task}.*.jsonl'))):
        events = [json.loads(l) for l in open(path)]
        header = next((e['data'] for e in events if e['type'] == 'request/header'), None)
        if not header or a.old not in header['system_prompt']:
            continue
        msgs = conversation(events, a.at)
        if not msgs:
            continue
        key = json.dumps(msgs[-3:])
        if key in seen: continue
        seen.add(key)
        print('#', path, flush=True)
        for name, text in (('old', a.old), ('new', a.new)):
            h = dict(header); h['system_prompt'] = header['system_prompt'].replace(a.old, text)
            for s in seeds:
                r = step_ab.ask('http://127.0.0.1:8091', h, [dict(m) for m in msgs], '\0', '\0', s)
                print(task, name, s, r.strip()[:220], flush=True)
