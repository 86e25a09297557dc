"""`driver diagnose` and `driver export-prompts` on constructed files with known answers."""
from __future__ import annotations

import json
import statistics

import pytest

from conftest import driver, driver_env


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(ex, reward, text="x", truncated=False, **kw):
    return {"example_id": ex, "prompt": [{"role": "user", "content": f"task {ex}"}],
            "completion": [{"role": "assistant", "content": text}], "reward": reward,
            "is_truncated": truncated, **kw}


def test_every_number_on_a_constructed_file(tmp_path):
    # 4 groups of 4: g0 mixed 1/0; g1 all 1; g2 shaped all-fail 0.1/0.2 (raw-live only);
    # g3 all 0. Longer completions earn more (positive effort correlation); 2 truncated.
    rows = []
    spec = {0: [1, 0, 1, 0], 1: [1, 1, 1, 1], 2: [0.1, 0.2, 0.1, 0.2], 3: [0, 0, 0, 0]}
    for ex, rewards in spec.items():
        for k, r in enumerate(rewards):
            rows.append(row(ex, r, text="y" * int(10 + 40 * r + k), truncated=(ex == 3 and k < 2)))
    f = write(tmp_path / "r.jsonl", rows)
    r = driver(["diagnose", str(f), "--json"], driver_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["rows"] == 16 and d["groups"] == 4
    assert d["group_sizes"] == {"4": 4} and d["uniform_groups"] is True
    assert d["live_fraction_outcome"] == 0.25         # only g0 passes and fails
    assert d["live_fraction_reward"] == 0.5           # g0 and the shaped g2
    rewards = [x["reward"] for x in rows]
    lengths = [len(x["completion"][0]["content"]) for x in rows]
    assert d["effort_kind"] == "completion_length"
    assert d["effort_correlation"] == pytest.approx(statistics.correlation(lengths, rewards), abs=1e-4)
    assert d["mean_reward"] == pytest.approx(statistics.fmean(rewards), abs=1e-4)
    assert d["truncation_rate"] == 0.125
    assert d["verdict"] == "PASS" and d["reasons"] == []


def test_mixed_group_sizes_fail_with_the_histogram(tmp_path):
    rows = []
    sizes = [8] * 5 + [16] + [40] * 2
    for ex, n in enumerate(sizes):
        rows += [row(ex, float(k % 2)) for k in range(n)]
    r = driver(["diagnose", str(write(tmp_path / "r.jsonl", rows))], driver_env(tmp_path))
    assert r.returncode == 1
    assert "MIXED ({8: 5, 16: 1, 40: 2})" in r.stdout
    assert 'group sizes differ: {"8": 5, "16": 1, "40": 2}' in r.stdout
    assert "verdict              FAIL" in r.stdout


def test_effort_buys_risk_is_read_from_tool_calls_when_present(tmp_path):
    rows = []
    for ex in range(6):
        for calls in range(4):
            comp = [{"role": "assistant", "content": "", "tool_calls": [{"id": str(i)} for i in range(calls)]},
                    {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "done"}]
            rows.append({"example_id": ex, "completion": comp, "reward": 1.0 if calls == 0 else 0.0})
    r = driver(["diagnose", str(write(tmp_path / "r.jsonl", rows)), "--json"], driver_env(tmp_path))
    d = json.loads(r.stdout)
    assert r.returncode == 1
    assert d["effort_kind"] == "tool_calls"
    expect = statistics.correlation([float(c) for _ in range(6) for c in range(4)],
                                    [1.0 if c == 0 else 0.0 for _ in range(6) for c in range(4)])
    assert d["effort_correlation"] == pytest.approx(expect, abs=1e-4) and expect < -0.2
    assert any("effort buys risk" in x for x in d["reasons"])
    assert d["live_fraction_outcome"] == 1.0


def test_shaped_all_fail_groups_look_live_only_on_the_raw_reward(tmp_path):
    rows = [row(ex, 0.1 + 0.01 * k) for ex in range(10) for k in range(4)]
    r = driver(["diagnose", str(write(tmp_path / "r.jsonl", rows)), "--json"], driver_env(tmp_path))
    d = json.loads(r.stdout)
    assert d["live_fraction_reward"] == 1.0 and d["live_fraction_outcome"] == 0.0
    assert r.returncode == 1 and any("live fraction 0.000" in x for x in d["reasons"])
    # float noise is not liveness
    rows = [row(ex, 1.0 + 1e-9 * k) for ex in range(3) for k in range(4)]
    d = json.loads(driver(["diagnose", str(write(tmp_path / "n.jsonl", rows)), "--json"],
                          driver_env(tmp_path)).stdout)
    assert d["live_fraction_reward"] == 0.0


def test_bad_files_are_usage_errors(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"example_id": 1, "reward": 1}\nnot json\n')
    r = driver(["diagnose", str(tmp_path / "bad.jsonl")], driver_env(tmp_path))
    assert r.returncode == 2 and "bad.jsonl:2 is not JSON" in r.stderr
    write(tmp_path / "nr.jsonl", [{"example_id": 1, "reward": "high"}])
    r = driver(["diagnose", str(tmp_path / "nr.jsonl")], driver_env(tmp_path))
    assert r.returncode == 2 and "no numeric reward" in r.stderr
    r = driver(["diagnose", str(tmp_path / "missing.jsonl")], driver_env(tmp_path))
    assert r.returncode == 2 and "is not a file" in r.stderr


def test_export_prompts_counts_and_shape(tmp_path):
    spec = {"situations": ["the user asks to fill missing bars forward",
                           {"text": "the user wants a refund for a late order"}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    rows = []

    def add(ex, text, situation, answer="A", k=4):
        for i in range(k):   # a group: k rollouts of one prompt
            rows.append({"example_id": ex, "prompt": [{"role": "system", "content": "sys"},
                                                      {"role": "user", "content": text}],
                         "answer": answer, "info": {"situation_id": situation, "truth": ex},
                         "completion": "c", "reward": float(i % 2)})

    add(0, "Fill the missing bars forward, please.", "s1")
    add(1, "Can you forward-fill the gaps in my bars?", "s1")          # 2nd phrasing of s1
    add(2, "The user asks to fill  missing bars forward", "s1")        # the seed text itself
    add(3, "I want my money back, the order was late.", "s2")
    add(4, "the user wants a refund for a late order", "s2")           # seed text
    add(5, "Refund me for the late parcel.", "s2")                     # 2nd phrasing of s2
    add(6, "What time is it in Lima?", "s3", answer="")
    f = write(tmp_path / "rl.jsonl", rows)
    out = tmp_path / "prompts.jsonl"
    r = driver(["export-prompts", str(f), "-o", str(out), "--json"], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert (c["prompts"], c["kept"], c["dropped_seed"], c["dropped_duplicate_phrasing"]) == (7, 3, 2, 2)
    kept = [json.loads(x) for x in out.read_text().splitlines()]
    assert [k["info"]["truth"] for k in kept] == [0, 3, 6]
    assert kept[0]["prompt"][1]["content"] == "Fill the missing bars forward, please."
    assert kept[0]["answer"] == "A" and "answer" not in kept[2]
    assert set(kept[0]) == {"prompt", "answer", "info"}
    # the flags keep what the filters drop
    r = driver(["export-prompts", str(f), "-o", str(out), "--keep-seeds", "--keep-phrasings",
                "--json"], driver_env(tmp_path))
    assert json.loads(r.stdout)["kept"] == 7
    r = driver(["export-prompts", str(f), "-o", str(out)], driver_env(tmp_path))
    assert "7 prompts -> 3 kept; dropped 2 as seed probes, 2 as duplicate phrasings" in r.stdout
    # another spec file: nothing matches, so only phrasings are dropped
    (tmp_path / "other.json").write_text(json.dumps({"situations": ["unrelated"]}))
    r = driver(["export-prompts", str(f), "-o", str(out), "--spec", str(tmp_path / "other.json"),
                "--json"], driver_env(tmp_path))
    c = json.loads(r.stdout)
    assert (c["kept"], c["dropped_seed"], c["dropped_duplicate_phrasing"]) == (3, 0, 4)
