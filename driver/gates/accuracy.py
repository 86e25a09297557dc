"""The ACCURATE pillar, checked by the driver: the hub env's own rubric scores every row's
`info.reasoning` as the completion, against the row's answer and info, and must give its full
reward (the sum of the rubric's positive weights).

The rubric is loaded in the trainer's interpreter (the one that runs the hub env), as
introspection loads it, never in the generator's guarded process. A reward function that raises
is caught by the rubric and scores 0; the exception's text, which the rubric only logs, is
captured per row so the gate can say, e.g., that the rows lack an `info` key the rubric reads.
Only generated rows are scored; the eval split is never touched.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

from driver.envs import worker

# Script text shared by the classic and the taskset scorer: `rows` = (line, row) of every row of
# `dataset` that carries an info.reasoning string.
READ_REASONED_ROWS = r"""
rows = []
with open(dataset, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("info"), dict) \
                and isinstance(row["info"].get("reasoning"), str):
            rows.append((n, row))
"""

# Runs in the target interpreter: argv = env_id, env_args JSON, dataset path.
_SCORE_ROWS = r"""
import asyncio, json, logging, sys
env_id, env_args, dataset = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
import verifiers as vf
from verifiers.types import State
env = vf.load_environment(env_id, **env_args)
def weights(rubric):
    if hasattr(rubric, "rubrics"):
        return [w for r in rubric.rubrics for w in weights(r)]
    return list(getattr(rubric, "weights", getattr(rubric, "reward_weights", [])))
ceiling = sum(w for w in weights(env.rubric) if w > 0)
class Catch(logging.Handler):
    # a reward function's exception reaches only the log: keep its text for the gate
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage()[:300])
catch = Catch()
logging.getLogger().addHandler(catch)
for name in list(logging.root.manager.loggerDict):
    if name.startswith("verifiers"):
        logging.getLogger(name).addHandler(catch)
""" + READ_REASONED_ROWS + r"""system = [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []
async def score(n, row):
    st = State(input={"prompt": system + [{"role": "user", "content": str(row.get("question", ""))}],
                      "answer": str(row.get("answer", "")), "info": row["info"], "example_id": n,
                      "task": "default"})
    st["completion"] = [{"role": "assistant", "content": row["info"]["reasoning"]}]
    st["trajectory"] = []
    catch.messages = []
    try:
        await env.rubric.score_rollout(st)
        reward = float(st["reward"])
    except Exception as e:
        reward, catch.messages = 0.0, catch.messages + [f"{type(e).__name__}: {e}"[:300]]
    return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
            "reward": reward, "errors": list(dict.fromkeys(catch.messages))[:3]}
async def run():
    return [await score(n, r) for n, r in rows]   # one at a time: errors stay with their row
print("@@ACC@@" + json.dumps({"ceiling": ceiling, "rows": asyncio.run(run())}))
"""


def score_hub_rows(python: str, hub: dict, dataset: Path) -> dict:
    """score_rows against the run's hub env, classic or taskset (hub_env.json's `kind`)."""
    from driver.envs import tasksets

    if hub.get("kind") == tasksets.KIND:
        r = worker.run_py(python, tasksets.script("score_rows"),
                          [hub["env_id"], json.dumps(tasksets.train_fields(hub)), str(dataset),
                           hub.get("system_prompt") or ""], timeout=1800)
        return _scored(r, hub["env_id"])
    return score_rows(python, hub["env_id"], hub.get("env_args"), dataset)


def score_rows(python: str, env_id: str, env_args: dict | None, dataset: Path) -> dict:
    """{"ceiling": full reward, "rows": [{"line", "template", "reward", "errors"}]}."""
    r = worker.run_py(python, _SCORE_ROWS, [env_id, json.dumps(env_args or {}), str(dataset)],
                      timeout=1800)
    return _scored(r, env_id)


def _scored(r, env_id: str) -> dict:
    out = next((x for x in r.stdout.splitlines() if x.startswith("@@ACC@@")), None)
    if r.returncode != 0 or out is None:
        tail = "\n".join(r.stderr.strip().splitlines()[-6:]) or "no output"
        raise RuntimeError(f"could not score the rows' reasoning with {env_id}'s rubric:\n{tail}")
    return json.loads(out[len("@@ACC@@"):])


def failures(scored: dict) -> tuple[int, str]:
    """(rows below full reward, detail by template: count, lowest reward, up to five lines and
    the reward functions' own error text)."""
    ceiling = scored["ceiling"]
    bad = [r for r in scored["rows"] if r["reward"] < ceiling - 1e-9]
    by_template: dict = collections.defaultdict(list)
    for r in bad:
        by_template[tuple(r["template"])].append(r)
    parts = []
    for (dom, sub), rs in sorted(by_template.items(), key=lambda kv: str(kv[0])):
        errors = list(dict.fromkeys(e for r in rs for e in r["errors"]))[:2]
        parts.append(f"{dom}/{sub}: {len(rs)} rows, reward {min(r['reward'] for r in rs):g} of "
                     f"{ceiling:g}, lines " + ", ".join(str(r["line"]) for r in rs[:5])
                     + (" ..." if len(rs) > 5 else "")
                     + (f"; the rubric said: {' | '.join(errors)}" if errors else ""))
    return len(bad), "; ".join(parts)
