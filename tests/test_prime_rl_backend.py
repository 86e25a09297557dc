"""The prime-rl backend's contract: rendered configs against a classic-schema snapshot,
composition, hostile names, refusals before launch, pre-staging, --init-from, poll latency and
version detection."""
from __future__ import annotations


import json
import re
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

import pytest

from conftest import FAST, driver, driver_env, run_dir_from
from driver.backends import process
from driver.backends import Command
from driver.backends.prime_rl import detect_dialect
from driver.dialects import classic_schema
from driver.dialects.classic import ClassicDialect
from driver.run.model import Knobs
from rl_contract.composition import compose
from driver.errors import DriverError, UsageError

D = ClassicDialect()
HUB = {"env_id": "stock_arithmetic", "eval_size": 200}
# what the driver renders classic prime-rl's evals from: no draws (prime_rl's default, and
# arm.eval_knobs drops any: one eval sampling for every eval env there)
KNOBS = Knobs.for_backend("prime_rl", model="Qwen/Qwen3-0.6B", batch_size=512, rollouts_per_example=16,
              steps_per_run=100, eval_examples=200, wandb="on")


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        p = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out.update(flat(v, p))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for i, item in enumerate(v):
                out.update(flat(item, f"{p}[{i}]"))
        else:
            out[p] = v
    return out


def render_all() -> dict[str, dict]:
    gen = D.train_env_block("stock_arithmetic_iter_3")
    hub_train = D.train_env_block("stock_arithmetic", name="hub-train")
    run_b_gen = D.train_env_block("stock_arithmetic_run_b", name="stock_arithmetic_run_b")
    texts = {
        "base": D.render_base(HUB, KNOBS),
        "overlay": D.render_eval_overlay(HUB, KNOBS),
        "iter_3": D.render_run(arm="iter_3", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS, train_envs=[gen],
                               resume_step=100),
        "run_a": D.render_run(arm="run_a", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS,
                              train_envs=[D.train_env_block("stock_arithmetic_run_a",
                                                            name="stock_arithmetic_run_a")],
                              resume_step=100),
        "run_b": D.render_run(arm="run_b", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS,
                              train_envs=[hub_train, run_b_gen], resume_step=None),
    }
    for name, text in texts.items():
        D.check_rendered(text)
    return {k: tomllib.loads(v) for k, v in texts.items()}


EVAL = {"orchestrator.eval.interval": 200, "orchestrator.eval.eval_base_model": False,
        "orchestrator.eval.sampling.max_completion_tokens": 1024,
        "orchestrator.eval.sampling.temperature": 0.0,
        "orchestrator.eval.env[0].id": "stock_arithmetic", "orchestrator.eval.env[0].num_examples": 200,
        "orchestrator.eval.env[0].rollouts_per_example": 1}


def test_rendered_configs_hold_exactly_the_classic_keys_with_the_intended_values():
    cfgs = render_all()
    for name, cfg in cfgs.items():
        assert classic_schema.unknown_keys(cfg) == [], name
    assert flat(cfgs["base"]) == {
        "max_steps": 100, "seq_len": 2048, "model.name": "Qwen/Qwen3-0.6B",
        "orchestrator.batch_size": 512, "orchestrator.rollouts_per_example": 16,
        "orchestrator.train.sampling.max_completion_tokens": 1024,
        "orchestrator.train.sampling.temperature": 1.0,
        "orchestrator.train.env[0].id": "stock_arithmetic", "trainer": {}, "inference": {}}
    assert flat(cfgs["overlay"]) == {
        "ckpt.interval": 100, "orchestrator.eval.interval": 100, "orchestrator.eval.eval_base_model": False,
        "orchestrator.eval.sampling.max_completion_tokens": 1024,
        "orchestrator.eval.sampling.temperature": 0.0,
        "orchestrator.eval.env[0].id": "stock_arithmetic",
        "orchestrator.eval.env[0].num_examples": 200,
        "orchestrator.eval.env[0].rollouts_per_example": 1}
    common = {"seq_len": 2048, "model.name": "Qwen/Qwen3-0.6B", "ckpt.interval": 100,
              "orchestrator.batch_size": 512, "orchestrator.rollouts_per_example": 16,
              "orchestrator.train.sampling.max_completion_tokens": 1024,
              "orchestrator.train.sampling.temperature": 1.0,
              "trainer": {}, "inference": {}, "wandb.project": "synthetic-self-improve-rl-stock_arithmetic"}
    assert flat(cfgs["iter_3"]) == {
        **common, **EVAL, "max_steps": 200, "ckpt.resume_step": 100, "wandb.name": "iter_3",
        "orchestrator.train.env[0].id": "stock_arithmetic_iter_3"}
    assert type(cfgs["iter_3"]["ckpt"]["resume_step"]) is int      # never a bool or a path
    assert flat(cfgs["run_a"]) == {
        **common, **EVAL, "max_steps": 200, "ckpt.resume_step": 100, "wandb.name": "run_a",
        "orchestrator.train.env[0].id": "stock_arithmetic_run_a",
        "orchestrator.train.env[0].name": "stock_arithmetic_run_a"}
    run_b = flat(cfgs["run_b"])
    assert "ckpt.resume_step" not in run_b                          # from base: no resume key
    assert run_b == {
        **common, **EVAL,
        "orchestrator.eval.interval": 100, "max_steps": 100, "wandb.name": "run_b",
        "orchestrator.train.env[0].id": "stock_arithmetic", "orchestrator.train.env[0].name": "hub-train",
        "orchestrator.train.env[1].id": "stock_arithmetic_run_b",
        "orchestrator.train.env[1].name": "stock_arithmetic_run_b"}


def test_a_hub_with_a_selection_split_is_evaluated_on_both_splits_in_one_launch():
    hub = {**HUB, "selection": {"args": {"eval_split": "validation"}, "split": "validation", "size": 150}}
    knobs = KNOBS.model_copy(update=dict(temperature=0.5))
    cfg = tomllib.loads(D.render_run(arm="iter_1", purpose="p", hub=hub, knobs=knobs, eval_knobs=knobs,
                                     train_envs=[D.train_env_block("x_iter_1")], resume_step=100))
    assert classic_schema.unknown_keys(cfg) == []
    assert cfg["orchestrator"]["eval"]["env"] == [
        {"id": "stock_arithmetic", "num_examples": 200, "rollouts_per_example": 1},
        {"id": "stock_arithmetic", "name": D.selection_env, "num_examples": 150,
         "rollouts_per_example": 1, "args": {"eval_split": "validation"}}]
    assert cfg["orchestrator"]["train"]["sampling"]["temperature"] == 0.5
    overlay = tomllib.loads(D.render_eval_overlay(hub, knobs))
    assert [e.get("name") for e in overlay["orchestrator"]["eval"]["env"]] == [None, D.selection_env]


def test_difficulty_filtering_renders_the_classic_buffer_key_that_the_embedded_trainer_reads(tmp_path):
    from embedded_trainer import config
    for on in (False, True):
        knobs = KNOBS.model_copy(update=dict(difficulty_filter=on))
        texts = {"base": D.render_base(HUB, knobs),
                 "run": D.render_run(arm="iter_1", purpose="p", hub=HUB, knobs=knobs, eval_knobs=knobs,
                                     train_envs=[D.train_env_block("x_iter_1")], resume_step=100)}
        for name, text in texts.items():
            cfg = tomllib.loads(text)
            assert classic_schema.unknown_keys(cfg) == [], name
            got = cfg["orchestrator"].get("buffer", {}).get("online_difficulty_filtering", False)
            assert got is on, (name, text)
            path = tmp_path / f"{name}-{on}.toml"
            path.write_text(text)
            loaded = config.load(["@", str(path)])
            assert loaded.orchestrator.buffer.online_difficulty_filtering is on


def test_composition_of_base_overlay_and_flags_gives_the_intended_iter0(tmp_path):
    (tmp_path / "base.toml").write_text(D.render_base(HUB, KNOBS))
    (tmp_path / "overlay.toml").write_text(D.render_eval_overlay(HUB, KNOBS))
    out = tmp_path / "iter_0" / "prime_out"
    cfg = compose(["@", str(tmp_path / "base.toml"), "@", str(tmp_path / "overlay.toml"),
                   *D.iter0_overrides(KNOBS, out)])
    D.check_effective(cfg)
    assert int(cfg["max_steps"]) == 100 and cfg["ckpt"]["interval"] == 100
    assert cfg["model"]["name"] == "Qwen/Qwen3-0.6B" and cfg["output_dir"] == str(out)
    assert int(cfg["orchestrator"]["batch_size"]) == 512
    assert int(cfg["orchestrator"]["rollouts_per_example"]) == 16
    assert cfg["orchestrator"]["train"]["env"] == [{"id": "stock_arithmetic"}]   # kept from base
    assert cfg["orchestrator"]["eval"]["env"][0]["num_examples"] == 200         # from the overlay
    assert cfg["orchestrator"]["eval"]["sampling"]["max_completion_tokens"] == 1024
    # a later file replaces a list whole instead of merging entries
    (tmp_path / "other.toml").write_text('[[orchestrator.train.env]]\nid = "x"\n')
    again = compose(["@", str(tmp_path / "base.toml"), "@", str(tmp_path / "other.toml")])
    assert again["orchestrator"]["train"]["env"] == [{"id": "x"}]


HOSTILE = ['Org/model"with]quotes', "Org/m'$(touch /tmp/pwned)`id`;rm -rf x", 'a\\b"]\n[x]'.replace("\n", " ")]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_model_names_render_as_data_and_reach_the_trainer_verbatim(tmp_path, name):
    knobs = Knobs.for_backend("prime_rl", model=name, batch_size=512, rollouts_per_example=16, steps_per_run=100,
                  eval_examples=200, wandb="on")
    cfg = tomllib.loads(D.render_run(arm="iter_1", purpose="p", hub={**HUB, "env_id": name},
                                     knobs=knobs, eval_knobs=knobs, train_envs=[D.train_env_block(name)], resume_step=3))
    assert cfg["model"]["name"] == name and cfg["orchestrator"]["train"]["env"][0]["id"] == name
    assert list(cfg) == ["max_steps", "seq_len", "wandb", "model", "ckpt", "orchestrator", "trainer", "inference"]
    # the launch path passes every argument as its own argv word, through no shell parsing
    seen = tmp_path / "argv.json"
    backend = Command((sys.executable, "-c",
                       "import json,sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"))
    args = [str(seen), *D.iter0_overrides(knobs, tmp_path / "out")]
    tp = process.launch(backend, args, tmp_path / "out", tmp_path / "train.log")
    process.poll(tp, tmp_path / "train.log", tmp_path / "none.jsonl", 0, interval=0.05,
                 limits=process.Limits(30, 30, 30))
    assert json.loads(seen.read_text()) == args


def test_names_with_newlines_or_control_characters_are_refused(tmp_path, runs):
    for bad in ("Org/model\n[trainer]", "Org/\x1bmodel"):
        r = driver(["run", "--model", bad, "--runs-dir", str(runs)], driver_env(tmp_path))
        assert r.returncode == 2 and "printable" in r.stderr
        r = driver(["run", "--hub-id", bad, "--runs-dir", str(runs)], driver_env(tmp_path))
        assert r.returncode == 2
    assert list(runs.iterdir()) == []


@pytest.mark.parametrize("cfg, needle", [
    ({"orchestrator": {"train": {"envs": []}}}, "orchestrator.train.envs"),
    ({"orchestrator": {"train": {"env": [{"id": "x", "nme": "y"}]}}}, "orchestrator.train.env[0].nme"),
    ({"ckpt": {"resume-step": 3}}, "ckpt.resume-step"),
    ({"rollouts_per_example": 16}, "rollouts_per_example"),
    ({"ckpt": {"resume_step": True}}, "positive integer"),
    ({"ckpt": {"resume_step": 0}}, "positive integer"),
    ({"max_steps": 100, "ckpt": {"resume_step": 100}}, "must exceed"),
    ({"orchestrator": {"batch_size": 500, "rollouts_per_example": 16}}, "not divisible"),
    ({"orchestrator": {"batch_size": 128, "rollouts_per_example": 16}}, "at least 16"),
    ({"orchestrator": {"eval": {"interval": 5}}}, "eval env missing"),
])
def test_config_refusals_name_the_problem(cfg, needle):
    with pytest.raises(UsageError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        D.check_effective(cfg, complete=False)


def test_a_launch_without_a_train_env_is_refused():
    with pytest.raises(UsageError, match="reverse-text"):
        D.check_effective({"orchestrator": {"eval": {"env": [{"id": "e"}]}}})


def test_foreign_run_sees_anything_but_the_prestaged_step(tmp_path):
    out = tmp_path / "prime_out"
    for tree in D.checkpoint_trees(out, 100):
        tree.mkdir(parents=True)
    assert D.foreign_run(out, 100) == []
    (out / "checkpoints" / "step_7").mkdir()
    (out / "run_default" / "rollouts" / "step_101").mkdir(parents=True)
    assert sorted(Path(p).name for p in D.foreign_run(out, 100)) == ["step_101", "step_7"]
    assert len(D.foreign_run(out, None)) == 6


def _ctx(tmp_path):
    return types.SimpleNamespace(iter_dir=lambda n: tmp_path / f"iter_{n}", dialect=D)


def test_prestage_links_exactly_the_trees_a_resume_reads(tmp_path):
    """A classic resume reads the trainer's and orchestrator's checkpoints and the step's
    broadcast, never weights/step_F (rl_contract/classic.py): those three are copied."""
    from driver.arms.arm import Arm
    from driver.arms.train import prestage

    src = tmp_path / "iter_0" / "prime_out"
    for step in (50, 100):
        for tree in D.checkpoint_trees(src, step):
            tree.mkdir(parents=True)
            (tree / "payload.bin").write_text(f"{tree.name}")
    (src / "run_default" / "rollouts" / "step_100").mkdir(parents=True)
    arm = Arm("iter_2", tmp_path / "iter_2", resume_step=100)
    prestage(_ctx(tmp_path), arm)
    staged = sorted(str(p.relative_to(arm.out)) for p in arm.out.rglob("*") if p.is_file())
    assert staged == ["checkpoints/step_100/payload.bin", "run_default/broadcasts/step_100/payload.bin",
                      "run_default/checkpoints/step_100/payload.bin"]
    assert not any(p.is_symlink() for p in arm.out.rglob("*"))   # no symlink into iter_0's dirs
    # each file a hard link of iter_0's (one inode, no second copy of a checkpoint); removing
    # the arm's name leaves iter_0's file whole
    for rel in staged:
        theirs = src / rel
        assert (arm.out / rel).stat().st_ino == theirs.stat().st_ino and theirs.stat().st_nlink == 2
    (arm.out / staged[0]).unlink()
    assert (src / staged[0]).read_text() == (src / staged[0]).parent.name
    # a missing tree stops the run and names it
    import shutil
    shutil.rmtree(src / "run_default" / "broadcasts" / "step_100")
    arm3 = Arm("iter_3", tmp_path / "iter_3", resume_step=100)
    with pytest.raises(DriverError, match="broadcasts/step_100"):
        prestage(_ctx(tmp_path), arm3)
    assert not (arm3.out / "checkpoints" / "step_100").exists()   # nothing half-staged


def test_init_from_refuses_an_incomplete_directory(tmp_path, runs):
    prior = tmp_path / "prior"
    (prior / "prime_out" / "weights" / "step_3").mkdir(parents=True)
    (prior / "prime_out" / "weights" / "step_3" / "model.safetensors").write_text("x")
    (prior / "run.json").write_text("{}")
    r = driver(["run", "--init-from", str(prior), *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2
    # no checkpoint a resume could read: named by the trees it needs
    for piece in ("checkpoints/step_N", "run_default/checkpoints/step_N", "run_default/broadcasts/step_N"):
        assert piece in r.stderr, piece
    for tree in D.resume_trees(prior / "prime_out", 3):
        tree.mkdir(parents=True)
    r = driver(["run", "--init-from", str(prior), *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2
    # the step's files a reused iter_0 needs: records, the last batch (filed under step 2),
    # its final eval, and what a loadable HF model directory holds
    for piece in ("metrics.json", "rollouts/step_2/train_rollouts.jsonl",
                  "rollouts/step_3/eval_rollouts.jsonl", "config.json", "tokenizer_config.json"):
        assert piece in r.stderr, piece
    assert list(runs.iterdir()) == []        # refused before a run directory was created


def test_preflight_refuses_an_env_that_is_not_installed(tmp_path, runs):
    base = tmp_path / "canonical.toml"
    base.write_text(D.render_base(HUB, KNOBS).replace('id = "stock_arithmetic"', 'id = "no_such_env_xyz"'))
    r = driver(["run", "--base-config", str(base), *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 1 and "no_such_env_xyz not installed" in r.stderr
    assert not (run_dir_from(r.stdout) / "iter_0" / "train.log").exists()   # never launched


def test_preflight_refuses_an_output_dir_that_holds_another_run(tmp_path, runs):
    env = driver_env(tmp_path, DRIVER_FAULT_KILL_AT="train:before-launch")
    r = driver(["run", *FAST, "--runs-dir", str(runs)], env)
    run_dir = run_dir_from(r.stdout)
    (run_dir / "iter_0" / "prime_out" / "checkpoints" / "step_9").mkdir(parents=True)
    r = driver(["resume", str(run_dir)], driver_env(tmp_path))
    assert r.returncode == 1 and "already holds another run" in r.stderr and "step_9" in r.stderr


# ---- polling -------------------------------------------------------------------------------

FAKE_TRAINER = r"""
import json, sys, time
eval_file, stamp, rows, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
time.sleep(1.0)
if rows:
    with open(eval_file, "w") as f:
        for i in range(rows):
            f.write(json.dumps({"example_id": i, "reward": 1.0}) + "\n")
open(stamp, "w").write(repr(time.time()))
sys.exit(rc)
"""


@pytest.mark.parametrize("rows, rc, outcome", [(5, 0, "done"), (0, 3, "failed")])
def test_poll_sees_completion_and_crashes_before_its_polling_interval(tmp_path, rows, rc, outcome):
    backend = Command((sys.executable, "-c", FAKE_TRAINER))
    eval_file, stamp = tmp_path / "eval.jsonl", tmp_path / "stamp"
    tp = process.launch(backend, [str(eval_file), str(stamp), str(rows), str(rc)], tmp_path,
                        tmp_path / "train.log")
    res = process.poll(tp, tmp_path / "train.log", eval_file, 5,   # 5 expected rows
                       limits=process.Limits(60, 60, 60))
    seen = time.time()
    assert res.outcome == outcome and res.returncode == rc
    # a generous bound, documented as such: the poll looks every second, so it answers within
    # about one (bench/poll_latency.py measures it against a log-tailing peer); four leaves room
    # for a loaded 2-core machine, and a poll that missed the exit would hit its cap instead
    assert seen - float(stamp.read_text()) < 4.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's boot time, as psutil reads it on Linux")
def test_a_clock_step_while_the_trainer_runs_does_not_make_it_look_dead(tmp_path, monkeypatch):
    """The kernel reports its boot time as wall clock minus uptime, in whole seconds, and
    psutil adds it to every process's start: a clock adjustment moves every create time by a
    second. A live trainer compared by create time then looked dead, and the arm failed."""
    import psutil

    backend = Command((sys.executable, "-c", "import time; time.sleep(60)"))
    tp = process.launch(backend, [], tmp_path, tmp_path / "train.log")
    try:
        assert process.is_alive(tp)
        real = psutil._psplatform.boot_time
        monkeypatch.setattr(psutil._psplatform, "boot_time", lambda: real() + 1.0)  # the step
        assert abs(psutil.Process(tp.pid).create_time() - tp.create_time - 1.0) < 0.01
        assert process.is_alive(tp)
        res = process.poll(tp, tmp_path / "train.log", tmp_path / "eval.jsonl", 5, interval=0.1,
                           limits=process.Limits(0.5, 0.5, 0.5))
        assert res.outcome == "stalled"            # still running (the caller stops it), not "failed"
        # a record from before the start since boot was kept compares create times, and the
        # step fools it; a different start (a recycled pid) is still not our trainer
        assert not process.is_alive(tp.model_copy(update={"started_since_boot": None}))
        assert not process.is_alive(tp.model_copy(update={"started_since_boot": tp.started_since_boot - 5}))
    finally:
        monkeypatch.undo()
        process.stop(tp, grace_s=1)
    assert not process.is_alive(tp)


# ---- version detection -----------------------------------------------------------------------

def _checkout(tmp_path, version=None, tag=None) -> Path:
    root = tmp_path / "prime-rl"
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "prime-rl"\n'
                                         + (f'version = "{version}"\n' if version else ""))
    if tag:
        git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "x"], check=True)
        subprocess.run([*git, "tag", tag], check=True)
    return root


@pytest.mark.parametrize("version, tag, dialect, nearest", [
    ("0.5.1.dev0", "v0.5.1.dev209", "classic", None),   # the tag wins over a static pyproject version
    (None, "v0.5.1.dev55", "classic", None),
    (None, "v0.5.1.dev225", "classic", None),
    (None, "v0.5.1.dev226", None, "v0.5.1.dev225 (classic), v0.8.1.dev57 (current)"),  # group_size era
    (None, "v0.8.1.dev56", None, "v0.5.1.dev225 (classic), v0.8.1.dev57 (current)"),   # weights/ still there
    ("0.8.0", "v0.8.1.dev57", "current", None),
    (None, "v0.8.1.dev67", "current", None),
    (None, "v0.8.1.dev68", None, "v0.8.1.dev67 (current)"),   # newer than any checked release
    ("0.5.0", None, None, "v0.5.1.dev55 (classic)"),
])
def test_the_dialect_follows_the_checkouts_version_window(tmp_path, monkeypatch, version, tag,
                                                          dialect, nearest):
    monkeypatch.delenv("DRIVER_PRIME_RL_VERSION", raising=False)
    root = _checkout(tmp_path, version, tag)
    if dialect:
        assert detect_dialect(root) == (dialect, tag.lstrip("v") if tag else version,
                                        "git tag" if tag else "pyproject.toml")
    else:
        with pytest.raises(UsageError) as e:
            detect_dialect(root)
        assert f"Nearest supported tags: {nearest}." in str(e.value)
        assert "git checkout v" in str(e.value) and "DRIVER_PRIME_RL_VERSION" in str(e.value)


def test_pyproject_0_8_0_is_ambiguous_and_an_unknown_version_is_refused_unless_stated(tmp_path, monkeypatch):
    monkeypatch.delenv("DRIVER_PRIME_RL_VERSION", raising=False)
    # pyproject.toml says 0.8.0 from v0.8.0 through v0.8.1.dev67: only a tag tells them apart
    with pytest.raises(UsageError, match="git fetch --tags"):
        detect_dialect(_checkout(tmp_path / "a", "0.8.0"))
    root = _checkout(tmp_path / "b")
    with pytest.raises(UsageError, match="DRIVER_PRIME_RL_VERSION"):
        detect_dialect(root)
    monkeypatch.setenv("DRIVER_PRIME_RL_VERSION", "0.5.1.dev150")
    assert detect_dialect(root) == ("classic", "0.5.1.dev150", "$DRIVER_PRIME_RL_VERSION")
    monkeypatch.setenv("DRIVER_PRIME_RL_VERSION", "v0.8.1.dev60")
    assert detect_dialect(root)[:2] == ("current", "0.8.1.dev60")


def test_a_refused_version_creates_no_run_directory(tmp_path):
    runs = tmp_path / "runs"
    env = {k: v for k, v in driver_env(tmp_path).items()
           if k not in ("DRIVER_RL_COMMAND", "DRIVER_PRIME_RL_VERSION")}
    r = driver(["run", "--prime-rl-dir", str(_checkout(tmp_path / "x", None, "v0.6.0")),
                "--runs-dir", str(runs)], env)
    assert r.returncode == 2 and "outside every supported window" in r.stderr, r.stderr
    assert "v0.5.1.dev225 (classic), v0.8.1.dev57 (current)" in r.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_a_stand_in_follows_the_named_checkouts_version_and_run_json_records_it(tmp_path, runs):
    """DRIVER_RL_COMMAND replaces `rl`, not the checkout: with a checkout named, the dialect is
    the checkout's, and a version in no window is refused as it would be without the stand-in."""
    env = {k: v for k, v in driver_env(tmp_path).items() if k != "DRIVER_PRIME_RL_VERSION"}
    r = driver(["run", "--prime-rl-dir", str(_checkout(tmp_path / "new", None, "v0.8.1.dev70")),
                "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 2 and "v0.8.1.dev67 (current)" in r.stderr, r.stderr
    r = driver(["run", "--prime-rl-dir", str(_checkout(tmp_path / "old", None, "v0.5.1.dev209")),
                "--runs-dir", str(runs), "--max-iters", "1", *FAST], env)
    assert r.returncode == 0, r.stderr
    state = json.loads((run_dir_from(r.stdout) / "run.json").read_text())
    assert (state["dialect"], state["prime_rl_version"], state["prime_rl_version_source"]) == \
        ("classic", "0.5.1.dev209", "git tag")
    assert "dialect: classic, prime-rl 0.5.1.dev209 from git tag" in r.stderr


@pytest.mark.extended   # a whole run: CI's extended command keeps the main suite in its budget
def test_init_from_reuses_a_prior_run_in_place(tmp_path, runs):
    import shutil

    from conftest import launches

    r = driver(["run", "--max-iters", "1", *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    first = run_dir_from(r.stdout)
    prior = tmp_path / "prior"            # the layout --init-from reads: {run,metrics}.json + prime_out/
    prior.mkdir()
    for f in ("run.json", "metrics.json"):
        shutil.copy(first / f, prior / f)
    shutil.copytree(first / "iter_0" / "prime_out", prior / "prime_out")
    prior_acc = json.loads((first / "metrics.json").read_text())["iters"][0]["eval_acc"]
    before = len(launches(tmp_path))
    r = driver(["run", "--init-from", str(prior), "--max-iters", "2", *FAST, "--runs-dir", str(runs)],
               driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    run_dir = run_dir_from(r.stdout)
    state = json.loads((run_dir / "run.json").read_text())
    assert state["iter_0_source"] == "init-from" and state["iter_0_path"] == str(prior)
    assert state["iter_0_step"] == 3
    it0 = json.loads((run_dir / "metrics.json").read_text())["iters"][0]
    assert it0["source"] == "init-from" and it0["eval_acc"] == prior_acc
    linked = run_dir / "iter_0" / "prime_out" / "weights" / "step_3"
    assert linked.is_symlink() and linked.resolve() == (prior / "prime_out" / "weights" / "step_3").resolve()
    # iter_0 was not trained again: only iter_1 (after its probe) and runs A, B and C launched
    outs = [Path(x["output_dir"]).parent.name for x in launches(tmp_path)[before:]]
    assert outs == ["probe", "iter_1", "run_a_best_from_iter0", "run_b_combined_from_base",
                    "run_c_untargeted_from_iter0"]
    # iter_1 resumed from the inherited step, from real copies of the trees
    staged = run_dir / "iter_1" / "prime_out" / "checkpoints" / "step_3"
    assert staged.is_dir() and not staged.is_symlink()
    # the inherited baseline carries per-example results: iter_1 gets a paired lift against it
    assert it0["n_eval"] == 200 and it0.get("selection_acc") is not None
    summary = (run_dir / "scratchpad.md").read_text()
    assert re.search(r"iter_1 .*[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]", summary), summary[-3000:]


def test_a_machine_with_no_nvidia_driver_is_refused_before_a_run_directory(tmp_path):
    """A real prime-rl checkout (not a stand-in) on a machine where no GPU is visible: no
    CUDA_VISIBLE_DEVICES and no nvidia-smi on PATH. prime-rl's launcher would fail after the
    run directory and the launch existed; the driver refuses first, saying what the backend
    needs and what else to use."""
    import os
    import stat

    root = tmp_path / "prime-rl"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "prime-rl"\nversion = "0.8.1.dev67"\n')
    os.symlink(sys.executable, root / ".venv" / "bin" / "python")
    bin_dir = tmp_path / "bin"          # uv is all prime-rl's launch needs on PATH
    bin_dir.mkdir()
    (bin_dir / "uv").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "uv").chmod((bin_dir / "uv").stat().st_mode | stat.S_IEXEC)
    env = driver_env(tmp_path)
    for k in ("DRIVER_RL_COMMAND", "CUDA_VISIBLE_DEVICES", "DRIVER_PRIME_RL_VERSION"):
        env.pop(k, None)
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    runs = tmp_path / "runs"
    r = driver(["run", "--backend", "prime_rl", "--prime-rl-dir", str(root), "--settings-from", "none",
                *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "no NVIDIA GPU is visible here (CUDA_VISIBLE_DEVICES is unset and nvidia-smi is not found)" in r.stderr
    assert "--backend hosted" in r.stderr and "--backend local" in r.stderr and "nothing was created" in r.stderr
    assert not runs.exists()


def test_no_fresh_classic_run_evaluates_the_base_model_nobody_reads(tmp_path):
    """A fresh classic run evaluates the base model at step 0 unless told not to
    (configs/orchestrator.py:367@09e2977): iter_0's eval overlay and run B's config turn it off,
    so the double (which files that eval as prime-rl does) writes no step_0 eval."""
    overlay = tomllib.loads(D.render_eval_overlay(HUB, KNOBS))
    assert overlay["orchestrator"]["eval"]["eval_base_model"] is False
    run_b = tomllib.loads(D.render_run(arm="run_b", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS,
                                       train_envs=[D.hub_train_block(HUB)], resume_step=None))
    assert run_b["orchestrator"]["eval"]["eval_base_model"] is False
    assert classic_schema.unknown_keys(overlay) == [] and classic_schema.unknown_keys(run_b) == []


def test_draws_are_rendered_as_eval_envs_of_several_rollouts_where_the_trainer_can_sample_them():
    """The embedded trainer (--backend local) reads the classic configs and samples an eval env
    of several rollouts per example as draws: each split again, under its draws name."""
    from driver.dialects.classic import DRAWS_ENVS

    hub = {**HUB, "selection": {"args": {"eval_split": "selection"}, "split": "selection", "size": 150}}
    blocks = D.eval_env_blocks(hub, KNOBS.model_copy(update={"eval_draws": 4}))
    assert [(b.get("name"), b["num_examples"], b["rollouts_per_example"]) for b in blocks] == [
        (None, 200, 1), (D.selection_env, 150, 1), (DRAWS_ENVS["eval"], 200, 4),
        (DRAWS_ENVS["selection"], 150, 4)]
    assert blocks[3]["args"] == {"eval_split": "selection"}


@pytest.mark.parametrize("backend,dialect,stand_in,draws", [
    ("local", "classic", None, 4), ("local", "classic", "python double.py", 0),
    ("prime_rl", "classic", None, 0), ("prime_rl", "current", None, 4), ("hosted", "current", None, 0)])
def test_an_arm_is_measured_with_draws_only_where_its_eval_can_sample_them(backend, dialect, stand_in, draws):
    from types import SimpleNamespace

    from driver import dialects
    from driver.arms.arm import eval_knobs
    from driver.backends import hosted, local, prime_rl

    cls = {"local": local.Local, "prime_rl": prime_rl.PrimeRL, "hosted": hosted.Hosted}[backend]
    be = SimpleNamespace(stand_in=stand_in)
    ctx = SimpleNamespace(knobs=KNOBS.model_copy(update={"eval_draws": 4}), dialect=dialects.get(dialect),
                          backend=SimpleNamespace(eval_draw_seeds=lambda per_source: cls.eval_draw_seeds(be, per_source)),
                          state=SimpleNamespace(eval_draws=4))
    assert eval_knobs(ctx).eval_draws == draws
