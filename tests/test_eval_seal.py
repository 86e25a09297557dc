"""The eval seal (driver/arms/seal.py): once an arm is evaluated, every eval file of it holds
numbers only. A sealed row reads as the whole row did and seals to itself; sealing an arm's
directory cuts every eval file in it (any step, any subset, attempts set aside, a file linked
from another run) and removes partial copies of one, touches nothing else, and a seal cut short
finishes on the next call. Whole runs check it too: the reference runs of both dialects
(test_full_run_and_resume.py, test_current_loop.py), the agent path (test_agent_path.py), and
canary runs of the embedded trainer and both dialects (test_teachers.py, test_current_loop.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from driver.analysis import evaluation
from driver.arms.seal import seal_tree
from driver.backends.process import count_lines
from driver.dialects import get

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "prime_rl_rows"
SECRET = "SEALED-EVAL-TEXT-5f2c"   # stands for any prompt, reply or answer of an eval row


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def classic_rows() -> list[dict]:
    """prime-rl's own eval row, and the shapes it may take: an errored rollout whose message
    quotes its prompt, a selection-split row, a row with an env label, a missing reward."""
    row = _fixture("classic_eval_row.json")
    errored = {**row, "example_id": 1, "error": f"ModelError: failed on {SECRET}", "reward": 0.0}
    selection = {**row, "example_id": 7, "metrics": {**row["metrics"], "split_selection": 1.0,
                                                      "flag": True}}
    labelled = {**row, "env_name": "hub-eval", "prompt": [{"role": "user", "content": SECRET}]}
    return [row, errored, selection, labelled, {**row, "reward": None, "answer": SECRET}]


def current_episodes() -> list[dict]:
    """prime-rl's own eval episode, and the shapes it may take: a failed episode with its
    errors, two traces, a reward whose score is missing."""
    ep = {**_fixture("current_eval_episode.json"), "env": {"id": "echo-v1", "name": "hub-eval"}}
    trace = ep["traces"][0]
    failed = {**ep, "ok": False, "errors": [f"timeout on {SECRET}"]}
    two = {**ep, "traces": [trace, {**trace, "rewards": {"echoed": {"score": 0.0, "weight": 2.0}},
                                    "metrics": {"turns": 3, "done": True}}]}
    no_score = {**ep, "traces": [{**trace, "rewards": {"echoed": {"weight": 1.0, "note": SECRET}}}]}
    return [ep, failed, two, no_score, _fixture("current_eval_episode.json")]


@pytest.mark.parametrize("dialect,rows", [("classic", classic_rows()), ("current", current_episodes())])
def test_a_sealed_row_reads_as_the_whole_row_and_seals_to_itself(dialect, rows):
    d = get(dialect)
    view = d.eval_view or evaluation._numeric_view
    for row in rows:
        sealed = d.sealed_eval_row(row)
        assert view(sealed) == view(row)
        assert d.sealed_eval_row(sealed) == sealed
        text = json.dumps(sealed)
        for placeholder in ("<QUESTION_TEXT>", "<MODEL_COMPLETION_TEXT>", "<ANSWER_TEXT>",
                            "<PROMPT_TEXT>", "<SYSTEM_PROMPT>", SECRET):
            assert placeholder not in text


def test_the_hosted_backends_download_is_already_sealed(tmp_path):
    """The hosted runner cuts eval traces to numbers as it downloads them, with the seal's own
    cut: sealing a hosted arm rewrites nothing."""
    from driver.backends.hosted.runner import HostedRunner

    d = get("current")
    ep = _fixture("current_eval_episode.json")
    remote = tmp_path / "remote.jsonl"
    remote.write_text(json.dumps(ep) + "\n")

    class VolumeGet:   # `prime volumes get V REMOTE LOCAL` copies the file
        def run(self, *args, timeout=0):
            import shutil
            import subprocess

            shutil.copyfile(remote, args[-1])
            return subprocess.CompletedProcess(args, 0, "", "")

    eval_file = tmp_path / "eval.jsonl"
    roots = {"r1": ({"rollouts": "runs/r1"}, ["runs/r1/rollouts/step_1/eval/all/traces.jsonl"])}
    assert HostedRunner(VolumeGet())._download_eval({"volume": "v"}, eval_file, roots) == 1
    (downloaded,) = [json.loads(x) for x in eval_file.read_text().splitlines()]
    assert downloaded == d.sealed_eval_row(ep) == d.sealed_eval_row(downloaded)
    assert "traces" in downloaded and "prompt" not in json.dumps(downloaded)


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _classic_arm(root: Path) -> dict[str, Path]:
    """An arm directory as classic prime-rl and the driver leave it, every eval file carrying
    SECRET: the final eval (with the selection split's rows), a base-model eval at step 0, an
    attempt set aside whose eval was torn, a temp file of an interrupted write, an eval file
    linked from another run (--init-from) and a directory linked from one."""
    d = get("classic")
    rows = [{**r, "prompt": [{"role": "user", "content": SECRET}]} for r in classic_rows()[:3]]
    out, other = root / "iter_1" / "prime_out", root / "other_run"
    return {
        "final": _write(d.eval_file(out, 6), _lines(rows)),
        "base": _write(d.eval_file(out, 0), _lines(rows[:1])),
        "train": _write(d.train_file(out, 5), _lines([{**rows[0], "env_name": "gen"}])),
        "torn": _write(d.eval_file(root / "iter_1" / "prime_out.failed-1", 6),
                       _lines(rows)[:-40]),
        "temp": _write(d.eval_file(out, 6).with_name(".eval_rollouts.jsonl.x1y2.tmp"), _lines(rows)),
        "target": _write(d.eval_file(other / "prime_out", 3), _lines(rows)),
        "dir_target": _write(d.eval_file(other / "kept", 3), _lines(rows)),
    }


def test_sealing_an_arm_cuts_every_eval_file_in_it_and_nothing_else(tmp_path):
    d = get("classic")
    f = _classic_arm(tmp_path)
    arm = tmp_path / "iter_1"
    linked = d.eval_file(arm / "prime_out", 3)
    linked.parent.mkdir(parents=True)
    os.symlink(f["target"], linked)
    os.symlink(f["dir_target"].parent, arm / "prime_out" / "linked_dir")
    before = evaluation.aggregate(f["final"], selection_env=d.selection_env, unique_ids=True)
    train_text, target_text = f["train"].read_text(), f["target"].read_text()

    seal_tree(d, arm)

    after = evaluation.aggregate(f["final"], selection_env=d.selection_env, unique_ids=True)
    assert after == before and "selection" in after
    assert count_lines(f["final"]) == 3 and count_lines(f["base"]) == 1
    assert count_lines(f["torn"]) == 2          # the torn line holds nothing anyone reads
    assert not f["temp"].exists()               # a partial copy is removed
    assert not linked.is_symlink() and count_lines(linked) == 3   # a sealed copy in its place
    assert f["target"].read_text() == target_text                  # the other run's file kept
    assert SECRET in f["dir_target"].read_text()                   # a linked dir is not entered
    assert f["train"].read_text() == train_text                    # train rows are the teacher's
    for path in (f["final"], f["base"], f["torn"], linked):
        assert SECRET not in path.read_text()
        assert all(json.loads(x) == d.sealed_eval_row(json.loads(x)) for x in path.read_text().splitlines())
    # sealed again: nothing is written
    stamps = {p: p.stat().st_mtime_ns for p in (f["final"], f["base"], f["torn"], linked)}
    seal_tree(d, arm)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_sealing_a_current_arm_cuts_both_subsets_and_removes_a_download_left_behind(tmp_path):
    d = get("current")
    eps = [{**e, "task": {**e["task"], "data": {"prompt": SECRET}}} for e in current_episodes()]
    out = tmp_path / "iter_1" / "prime_out"
    final = _write(d.eval_file(out, 6), _lines(eps))
    effective = _write(final.parent.parent / "effective" / "traces.jsonl", _lines(eps[:1]))
    staging = _write(final.with_name("traces.jsonl.remote"), _lines(eps))
    train = _write(d.train_file(out, 6), _lines(eps[:1]))
    before = evaluation.aggregate(final, view=d.eval_view)

    seal_tree(d, tmp_path / "iter_1")

    assert evaluation.aggregate(final, view=d.eval_view) == before
    assert count_lines(final) == len(eps) and count_lines(effective) == 1
    assert not staging.exists()
    assert SECRET not in final.read_text() + effective.read_text()
    assert SECRET in train.read_text()


def test_a_seal_cut_short_finishes_on_the_next_call(tmp_path, monkeypatch):
    """A driver that dies while sealing (here: an error at the second file's rename) leaves each
    file whole, sealed or not; the next call seals the rest."""
    from driver import faults

    d = get("classic")
    f = _classic_arm(tmp_path)
    monkeypatch.setenv("DRIVER_FAULT_BUG_AT", "write:eval_rollouts.jsonl#2")
    faults._hits.clear()
    with pytest.raises(RuntimeError):
        seal_tree(d, tmp_path / "iter_1")
    sealed = [p for p in (f["final"], f["base"], f["torn"]) if SECRET not in p.read_text()]
    assert len(sealed) == 1
    monkeypatch.delenv("DRIVER_FAULT_BUG_AT")
    seal_tree(d, tmp_path / "iter_1")
    assert not any(SECRET in p.read_text() for p in (f["final"], f["base"], f["torn"]))
