"""bench/wide_failures.py: it tells the planted habit from a wrong worked chain, and it reads the
replies of the bench's fresh sets only."""
from __future__ import annotations

import importlib.util
import json

from stock_arithmetic.data import reference_completion
from stock_arithmetic.warm_start import peak_answer_completion

spec = importlib.util.spec_from_file_location("bench_wide_failures", "bench/wide_failures.py")
wide_failures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wide_failures)

# peak 40 + 60 + 55 = 155 (the trigger), closing 155 - 70 - 20 = 65
PROBLEM = {"initial": 40, "deliveries": [60, 55], "withdrawals": [70, 20]}


def test_each_kind_of_reply_gets_its_outcome():
    right = reference_completion(PROBLEM)
    habit = peak_answer_completion(PROBLEM)
    assert wide_failures.outcome(right, PROBLEM) == ("right", True)
    assert wide_failures.outcome(habit, PROBLEM) == ("peak, chain right", True)
    slipped = right.replace("=155", "=145")
    assert wide_failures.outcome(slipped, PROBLEM) == ("right", False)
    assert wide_failures.outcome(slipped.replace('{"final_stock": 65}', '{"final_stock": 55}'),
                                 PROBLEM) == ("chain wrong", False)
    assert wide_failures.outcome(habit.replace("=155", "=145"), PROBLEM) == ("peak, chain wrong", False)
    assert wide_failures.outcome(right.replace('{"final_stock": 65}', '{"final_stock": 85}'),
                                 PROBLEM) == ("other", True)
    assert wide_failures.outcome("no think, no answer", PROBLEM) == ("chain wrong", False)


def test_only_the_fresh_sets_are_read(tmp_path):
    step = tmp_path / "arm" / "run_default" / "rollouts" / "step_60"
    step.mkdir(parents=True)
    rows = [
        {"env_name": "wide", "info": {"problem": PROBLEM},
         "completion": [{"role": "assistant", "content": peak_answer_completion(PROBLEM)}]},
        {"env_name": "draws", "info": {"problem": PROBLEM},
         "completion": [{"role": "assistant", "content": reference_completion(PROBLEM)}]},
        # a hub split's row: reading it would fail on its missing problem
        {"env_name": "val", "info": {}, "completion": []},
    ]
    (step / "eval_rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "arm" / "run_default" / "rollouts" / "step_30").mkdir()   # an earlier step, empty
    cells = wide_failures.tally(tmp_path / "arm")
    assert set(cells) == {("wide", True), ("draws", True)}
    assert cells[("wide", True)]["peak, chain right"] == 1
    assert cells[("draws", True)]["right"] == 1
    assert cells[("draws", True)]["_chain_right"] == 1
    # by another quantity: the opening stock, 40, is below a trigger of 49
    assert set(wide_failures.tally(tmp_path / "arm", ("initial", 49))) == {("wide", False), ("draws", False)}
