"""The house's own rules: every run-model field is a flag with its help, the import layers point
one way, a new control arm is one table entry, `--dry-run` renders and trains nothing, and a
base config is checked against the dialect the trainer speaks."""
from __future__ import annotations

import ast
import json
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from

ROOT = Path(__file__).resolve().parent.parent


def _run_parser():
    import argparse

    from driver.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _fields(model, prefix=""):
    """(dotted name, field) of every leaf field; a nested model's fields under its name."""
    from pydantic import BaseModel

    from driver.commands.flags import _base_type

    for name, f in model.model_fields.items():
        kind = _base_type(f.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _fields(kind, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", f


def test_every_run_model_field_is_a_run_flag_with_its_help_and_every_run_flag_is_a_field():
    from driver.commands import run
    from driver.run.model import RunConfig

    parser = _run_parser()["run"]
    by_flag = {s: a for a in parser._actions for s in a.option_strings}
    fields = dict(_fields(RunConfig))
    assert set(run._FLAGS) - {"llm"} == set(fields)          # one flag per field, no more
    for name, field in fields.items():
        action = by_flag[run._FLAGS[name]]
        assert field.description and action.help.startswith(field.description.replace("%", "%%")), name
        by_backend = (field.json_schema_extra or {}).get("by_backend")
        if by_backend:   # each backend's own default is shown, from the field itself
            assert all(f"{b}: " in action.help for b in by_backend), name
    command_only = {"-h", "--help", "--runs-dir", "--dry-run"}
    assert set(by_flag) - command_only == set(run._FLAGS[n] for n in fields)


def test_resume_takes_exactly_the_fields_marked_resumable():
    from driver.commands import resume
    from driver.run.model import RunConfig

    parser = _run_parser()["resume"]
    flags = {s for a in parser._actions for s in a.option_strings} - {"-h", "--help"}
    resumable = {n for n, f in _fields(RunConfig) if (f.json_schema_extra or {}).get("resumable")}
    # besides them, exactly one flag that is there to be refused with advice: --model
    assert resume.REFUSED == ("--model",)
    assert resumable and {resume._FLAGS[n] for n in resumable} == flags - set(resume.REFUSED)


# --------------------------------------------------------------------------------------------
# Import layers: a module imports only from its own layer or the ones below (lazy imports
# inside functions included), and no two modules import each other at module level.

LAYERS = [
    ("driver.cli", "driver.commands"),
    ("driver.loop",),
    ("driver.phases",),
    ("driver.reporting", "driver.teachers"),
    ("driver.arms",),
    ("driver.context", "driver.seams"),
    ("driver.gates", "driver.analysis", "driver.backends", "driver.dialects", "driver.envs"),
    ("driver.run",),
    ("driver.envside", "driver.clock", "driver.errors", "driver.faults", "driver.resources", "driver"),
]


def _layer(module: str) -> int:
    best = None
    for k, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                if best is None or len(p) > best[1]:
                    best = (k, len(p))
    assert best is not None, module
    return best[0]


def _imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """(every driver module it imports, those imported at module level)."""
    tree = ast.parse(path.read_text())
    every, top = set(), set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        names = [n for n in names if n.startswith("driver")]
        every.update(names)
        if node in tree.body or any(node in b.body for b in tree.body if isinstance(b, ast.If)
                                    and ast.unparse(b.test) != "TYPE_CHECKING"):
            top.update(names)   # (imports for type checking only never run: no circle)
    return every, top


def _modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "driver").rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def test_imports_point_down_the_layers_and_no_module_level_circle():
    mods = _modules()
    upward = []
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        if mod.startswith("driver.envside"):
            continue   # runs in the training interpreter, by path: imports no driver module
        every, top = _imports(path, mod)
        for target in every:
            real = target if target in mods else target.rpartition(".")[0]
            if real in mods and real != mod and _layer(real) < _layer(mod):
                upward.append(f"{mod} -> {real}")
        graph[mod] = {t if t in mods else t.rpartition(".")[0] for t in top} & set(mods) - {mod}
    assert upward == []
    # a circle: a module reachable from itself through module-level imports (packages'
    # __init__ excluded as targets: importing a submodule loads its package anyway)
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen and nxt in graph and mods[nxt].name != "__init__.py":
                    seen.add(nxt)
                    todo.append(nxt)
        return seen
    assert [m for m in graph if m in reach(m)] == []


def test_the_envside_scripts_import_no_driver_module():
    for p in (ROOT / "driver" / "envside").rglob("*.py"):
        every, _ = _imports(p, "")
        assert every == set(), p


# --------------------------------------------------------------------------------------------
# Names that match files: a project module is imported under its own name

PROJECT = ("driver", "rl_contract", "embedded_trainer", "generators")


def _project_modules() -> set[str]:
    """Every module and package of the project, dotted (driver.envs.envside, generators, ...)."""
    out = set()
    for package in PROJECT:
        for p in (ROOT / package).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _renamed_imports(path: Path, modules: set[str]) -> list[str]:
    """`import A.B as C` / `from A import B as C` where A.B is a project module and C is not B.
    A file of driver/envside imports its siblings by plain name (`import rows`): those count."""
    sibling = "driver.envside." if path.parent == ROOT / "driver" / "envside" else None
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            pairs = [(a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
        else:
            continue
        for name, asname in pairs:
            is_module = name in modules or (sibling is not None and sibling + name in modules)
            if is_module and asname and asname != name.rpartition(".")[2]:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name} as {asname}")
    return found


def test_a_project_module_is_imported_under_its_own_name():
    """`from driver.envs import envside`, then `envside.call(...)`: the name in the code is the
    file's, so a reader finds the module by its name (third-party conventions such as
    `import verifiers as vf` and aliases of functions are not modules of the project)."""
    modules = _project_modules()
    renamed = [hit for folder in (*PROJECT, "tests", "bench", "tools")
               for p in sorted((ROOT / folder).rglob("*.py")) for hit in _renamed_imports(p, modules)]
    assert renamed == []


# --------------------------------------------------------------------------------------------
# One table of arms

@pytest.mark.extended   # a whole run: CI's extended command keeps the main suite in its budget
def test_a_fourth_control_arm_is_one_table_entry(tmp_path, monkeypatch):
    """A control that replays the best dataset from the base model, added to the table alone:
    the loop runs it after the others, trains it from base, evaluates it on the whole eval
    split, records it in metrics.json and puts its row in the summary."""
    from driver import cli
    from driver.arms import table

    def replay_best_every_other(ctx, best, dest):   # a row source of its own: half the best rows
        from driver.run.files import atomic_write_text

        table.carry_best_settings(ctx, best, dest)
        rows = (ctx.rd.path / best["dataset"]).read_text().splitlines(keepends=True)
        atomic_write_text(dest, "".join(rows[::2]))   # written last, once: present means complete
        return f"every other row of iter_{best['best_iter']}'s dataset"

    run_d = table.ControlArm("run_d", "run_d_best_from_base", "run_d (best @base)",
                             "best dataset alone, from the base model", "base", replay_best_every_other)
    monkeypatch.setattr(table, "CONTROLS", (*table.CONTROLS, run_d))
    for k, v in driver_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    runs = tmp_path / "runs"
    # the dry run shows every arm's config, the fourth control's included; the run launches those
    assert cli.main(["run", "--dry-run", "--max-iters", "2", *FAST, "--runs-dir", str(runs)]) == 0
    [rd] = list(runs.iterdir())
    assert cli.main(["resume", str(rd)]) == 0
    for arm, d in (("iter_1", "iter_1"), ("run_a", "run_a_best_from_iter0"),
                   ("run_b", "run_b_combined_from_base"), ("run_c", "run_c_untargeted_from_iter0"),
                   ("run_d", "run_d_best_from_base")):
        assert (rd / "dry_run" / arm / "rl.toml").read_text() == (rd / d / "rl.toml").read_text(), arm
    state = json.loads((rd / "run.json").read_text())
    phases = [h["phase"] for h in state["history"]]
    assert phases[-5:] == ["run_a", "run_b", "run_c", "run_d", "finalize"]
    metrics = json.loads((rd / "metrics.json").read_text())
    assert [c["run"] for c in metrics["controls"]] == ["run_a", "run_b", "run_c", "run_d"]
    d = rd / "run_d_best_from_base"
    cfg = tomllib.loads((d / "rl.toml").read_text())
    assert "resume_step" not in cfg.get("ckpt", {}) and cfg["max_steps"] == 3   # from base
    best_rows = (rd / "iter_1" / "dataset.jsonl").read_text().splitlines(keepends=True)
    assert (d / "dataset.jsonl").read_text() == "".join(best_rows[::2])
    entry = next(c for c in metrics["controls"] if c["run"] == "run_d")
    assert entry["n_eval"] == 200 and entry["best_iter"] == 1
    assert "run_d (best @base)" in (rd / "scratchpad.md").read_text()


# --------------------------------------------------------------------------------------------
# --dry-run, and a base config checked against the dialect the trainer speaks

def test_dry_run_renders_every_config_then_resume_trains_on_exactly_those(tmp_path, runs):
    env = driver_env(tmp_path)
    r = driver(["run", "--dry-run", "--max-iters", "1", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    rendered = [Path(line.split(": ", 1)[1]) for line in r.stdout.splitlines()
                if line.startswith("rendered: ")]
    assert [p.relative_to(rd).as_posix() for p in rendered] == [
        "iter_0/base_rl.toml", "iter_0/eval_overlay.toml", "dry_run/iter_1/rl.toml",
        "dry_run/run_a/rl.toml", "dry_run/run_b/rl.toml", "dry_run/run_c/rl.toml"]
    assert launches(tmp_path) == []                      # nothing launched
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "dry_run" and state["phase"] == "baseline"
    it1 = tomllib.loads((rd / "dry_run" / "iter_1" / "rl.toml").read_text())
    assert it1["ckpt"]["resume_step"] == 3 and it1["max_steps"] == 6   # absolute, from iter_0's F
    assert "resume_step" not in tomllib.loads((rd / "dry_run" / "run_b" / "rl.toml").read_text())["ckpt"]
    base = (rd / "iter_0" / "base_rl.toml").read_text()
    r = driver(["resume", str(rd)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    [launch] = launches(tmp_path)                         # iter_0 only: max_iters 1
    assert launch["argv"][:4] == ["@", str(rd / "iter_0" / "base_rl.toml"),
                                  "@", str(rd / "iter_0" / "eval_overlay.toml")]
    assert (rd / "iter_0" / "base_rl.toml").read_text() == base



@pytest.mark.parametrize("given, iter0, later", [([], 4e-5, 5e-5), (["--iter0-lr", "3e-5"], 3e-5, 5e-5),
                                                 (["--lr", "3e-5"], 3e-5, 3e-5),
                                                 (["--lr", "4e-5", "--iter0-lr", "1e-5"], 1e-5, 4e-5)],
                         ids=["local-defaults", "iter0-alone", "lr-alone", "both"])
def test_iter0_lr_is_the_anchors_rate_alone(tmp_path, runs, given, iter0, later):
    """--iter0-lr sets iter_0's rate and no other arm's, and the run header says so (--help:
    local default 4e-5 beside --lr's 5e-5; a --lr given without it sets iter_0's rate too); a
    run.json written before the field resumes with iter_0 at its lr."""
    from driver.run.model import RunState

    r = driver(["run", "--dry-run", "--backend", "local", "--max-iters", "2", *given,
                "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    said = [line for line in r.stderr.splitlines() if line.startswith("learning rate: ")]
    assert said == ([] if iter0 == later else
                    [f"learning rate: iter_0 at {iter0:g} (--iter0-lr), every later arm, controls "
                     f"included, at {later:g} (--lr)"])
    assert tomllib.loads((rd / "iter_0" / "base_rl.toml").read_text())["trainer"]["optim"]["lr"] == iter0
    for arm in ("iter_1", "run_a", "run_b", "run_c"):
        assert tomllib.loads((rd / "dry_run" / arm / "rl.toml").read_text())["trainer"]["optim"]["lr"] == later, arm
    state = json.loads((rd / "run.json").read_text())
    assert state["lr"] == later and state["iter0_lr"] == (None if iter0 == later else iter0)
    del state["iter0_lr"]
    assert RunState.model_validate(state).knobs().for_iter0().lr == later


def test_the_local_iter0_rate_is_a_default_only_beside_the_default_lr(tmp_path):
    """--iter0-lr's local default applies where --lr is its own default too: a --lr given alone
    is iter_0's rate as well (for the run and for Knobs alone), an --init-from run (iter_0
    trained already) takes no iter_0 rate and is not refused for one it was never given, and
    prime_rl has no iter_0 rate by default."""
    from driver.run.model import Knobs, RunConfig

    assert RunConfig.model_validate({"backend": "local"}).for_iter0().lr == 4e-5
    assert RunConfig.model_validate({"backend": "local", "lr": 2e-5}).for_iter0().lr == 2e-5
    reused = RunConfig.model_validate({"backend": "local", "init_from": str(tmp_path)})
    assert (reused.iter0_lr, reused.lr) == (None, 5e-5)
    with pytest.raises(ValueError, match="--init-from reuses an iter_0 already trained"):
        RunConfig.model_validate({"backend": "local", "init_from": str(tmp_path), "iter0_lr": 3e-5})
    assert Knobs.for_backend("local", lr=5e-5).for_iter0().lr == 5e-5
    assert Knobs.for_backend("prime_rl").iter0_lr is None


def test_a_dry_run_shows_each_arm_the_config_it_launches_with_a_canonical_config_too(tmp_path, runs):
    """One renderer for every arm (driver/arms/render.py): with --base-config, run_b's dry-run
    config trains on the canonical config's own train block, as run_b's launch does (the dry
    run once rendered the dialect's default block there instead), and every dry-run config
    passes the same checks as a launch's."""
    import tomli_w

    from driver.dialects import get
    from driver.run.model import Knobs

    base = tomllib.loads(get("classic").render_base({"env_id": "stock_arithmetic", "eval_size": 200},
                                                    Knobs.for_backend("prime_rl", steps_per_run=3)))
    base["orchestrator"]["train"]["env"][0]["name"] = "stock-canonical"
    (tmp_path / "canon.toml").write_text(tomli_w.dumps(base))
    r = driver(["run", "--dry-run", "--max-iters", "1", *FAST, "--base-config", str(tmp_path / "canon.toml"),
                "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    run_b = tomllib.loads((rd / "dry_run" / "run_b" / "rl.toml").read_text())
    blocks = run_b["orchestrator"]["train"]["env"]
    assert blocks[0] == base["orchestrator"]["train"]["env"][0] and len(blocks) == 2
    for arm in ("iter_1", "run_a", "run_c"):   # the generated env only, under the canonical name
        [only] = tomllib.loads((rd / "dry_run" / arm / "rl.toml").read_text())["orchestrator"]["train"]["env"]
        assert only["id"] != "stock_arithmetic", arm

def test_a_base_config_is_checked_against_the_dialect_the_checkout_speaks(tmp_path, runs):
    """A classic config given to a current-generation checkout is refused before anything is
    created (it was once checked against the classic schema whatever the checkout)."""
    from driver.dialects import get
    from driver.run.model import Knobs

    knobs = Knobs.for_backend("prime_rl")
    classic = tmp_path / "rl.toml"
    classic.write_text(get("classic").render_base({"env_id": "stock_arithmetic", "eval_size": 200}, knobs))
    env = driver_env(tmp_path, DRIVER_PRIME_RL_VERSION="0.8.1.dev67",
                     DRIVER_EVALS_COMMAND=f"{sys.executable} -c pass")
    r = driver(["run", "--base-config", str(classic), "--runs-dir", str(runs)], env)
    assert r.returncode == 2 and "does not compose for prime-rl's current configs" in r.stderr
    assert "rollouts_per_example is orchestrator.group_size" in r.stderr
    assert list(runs.iterdir()) == []


def test_a_knob_is_one_field_and_one_table_entry_per_dialect_and_reaches_every_config(tmp_path, monkeypatch):
    """A new knob (nucleus sampling, here) is one field of the run model and one KNOB_KEYS entry
    per dialect: it then reaches iter_0's base config and its flags over a canonical config,
    every arm's config and every eval (iter_0's overlay, an arm's in-run eval, the current
    generation's final-weights eval and the hosted eval run), with nothing else edited."""
    import types

    from pydantic import create_model

    from driver.backends.hosted import submission
    from driver.dialects import classic, current
    from driver.dialects.knob_keys import KnobKey
    from driver.run.model import Knobs, setting

    NucleusKnobs = create_model("NucleusKnobs", __base__=Knobs,
                                top_p=(float, setting(0.9, help="nucleus sampling", gt=0, le=1)))
    for module in (classic, current):
        monkeypatch.setattr(module, "KNOB_KEYS", module.KNOB_KEYS + (
            KnobKey("top_p", "orchestrator.train.sampling.top_p"),
            KnobKey("top_p", "orchestrator.eval.sampling.top_p", scope="eval")))
    knobs = NucleusKnobs(**Knobs.defaults_for("prime_rl"), wandb="off", top_p=0.77)
    hub = {"env_id": "stock_arithmetic", "eval_size": 200, "train_args": {"split": "train"}}

    from driver import dialects

    for name in ("classic", "current"):
        d = dialects.get(name)
        gen = d.train_sources("gen", None)
        base = tomllib.loads(d.render_base(hub, knobs))
        assert base["orchestrator"]["train"]["sampling"]["top_p"] == 0.77, name
        run = tomllib.loads(d.render_run(arm="iter_1", purpose="p", hub=hub, knobs=knobs, eval_knobs=knobs,
                                         train_envs=gen, resume_step=3, resume_from=tmp_path))
        assert run["orchestrator"]["train"]["sampling"]["top_p"] == 0.77, name
        flags = d.iter0_overrides(knobs, tmp_path)
        assert flags[flags.index("--orchestrator.train.sampling.top-p") + 1] == "0.77", name
        if name == "classic":
            assert run["orchestrator"]["eval"]["sampling"]["top_p"] == 0.77
            assert tomllib.loads(d.render_eval_overlay(hub, knobs))["orchestrator"]["eval"]["sampling"]["top_p"] == 0.77
        else:
            evals = d.render_final_eval(hub, knobs, tmp_path / "b", 6, tmp_path / "o")
            assert tomllib.loads(evals)["eval"]["sampling"]["top_p"] == 0.77
            (tmp_path / "evals.toml").write_text(evals)
            (tmp_path / "hub_env.json").write_text(json.dumps({**hub, "kind": "taskset"}))
            state = types.SimpleNamespace(knobs=lambda: knobs, model=knobs.model, hub_id="me/stock",
                                          hosted_volume="v")
            # (where a broadcast lies on the hosted volume is the records' job, not this test's)
            monkeypatch.setattr(submission, "volume_path", lambda run_dir, local: f"/volume/{local.name}")
            hosted = submission.eval_config(["@", str(tmp_path / "evals.toml")], tmp_path, state)
            assert hosted["orchestrator"]["train"]["sampling"]["top_p"] == 0.77
            assert hosted["orchestrator"]["eval"]["sampling"]["top_p"] == 0.77


def test_a_per_backend_default_that_leaves_a_backend_out_is_refused_where_it_is_declared():
    """A new backend added to BackendName must get its default in every by_backend table: the
    field is refused at import with the backends it misses, never a TypeError in a validator."""
    from driver.run.model import BACKEND_NAMES, setting

    with pytest.raises(TypeError, match=r"names no value for \['hosted'\].*give every backend"):
        setting(help="batch size", by_backend={"prime_rl": 512, "local": 64})
    field = setting(help="batch size", by_backend={name: 1 for name in BACKEND_NAMES})
    assert field.json_schema_extra["by_backend"] == {name: 1 for name in BACKEND_NAMES}


def test_the_readmes_figures_match_the_code_they_describe():
    """Figures the README states about the code, read from the code: the kill points of the
    kill-anywhere test, the control arms, the dialects' knob tables."""
    import re

    from driver.arms import table

    readme = (ROOT / "README.md").read_text()
    tree = ast.parse((ROOT / "tests" / "test_full_run_and_resume.py").read_text())
    points = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", "") == "KILL_POINTS")
    stated = re.search(r"SIGKILLed at any of (\d+) points", readme)
    assert stated and int(stated.group(1)) == len(points.elts)
    for arm in table.CONTROLS:
        assert arm.label in readme, arm.label


def test_ci_runs_the_readmes_test_commands_and_leaves_the_long_tier_out():
    """`.ci/run` runs the README's test command verbatim, then its extended command; the long
    tier (many-minute runs of the real trainer) is documented and kept out of CI, whose limit
    is 90 minutes with the install."""
    import re
    import tomllib

    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    tests_section = readme[readme.index("## Tests"):]
    commands = [line for block in re.findall(r"```bash\n(.+?)\n```", tests_section, re.S)
                for line in block.splitlines()]
    assert commands[:3] == [commands[0], "python -m pytest -m extended", "python -m pytest -m long"]
    assert commands[0].endswith("&& python -m pytest") and commands[0] in ci
    assert commands[1] in ci and not any("-m long" in line for line in ci)
    # prime-rl's own code: its environments built, then its tests, as the README says
    build, real = commands[3].split(" && ")
    assert real == "python -m pytest -m prime_rl_real" and build in ci and real in ci
    assert ci.index(build) < ci.index(real)
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert addopts.endswith("-m 'not extended and not long and not prime_rl_real'")


def test_the_iteration_phase_does_not_branch_on_a_trainer_kind():
    """phases/iteration.py reads as the iteration's steps: what differs between backends (how a
    probe samples, what a paid probe costs) lives behind the backend and in arms/probe.py."""
    tree = ast.parse((ROOT / "driver" / "phases" / "iteration.py").read_text())
    kinds = {"launch", "worker", "command", "prime_rl", "local", "hosted"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Compare, ast.If, ast.IfExp, ast.Match)):
            words = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            words |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str)}
            assert not words & (kinds | {"kind"}), (node.lineno, words & (kinds | {"kind"}))


def test_the_architecture_maps_count_of_places_naming_a_backend_is_todays():
    """docs/architecture.md tells whoever adds a trainer how many lines still name a backend; the
    figure is the grep it prints, run on driver/ now."""
    import re

    doc = (ROOT / "docs" / "architecture.md").read_text()
    stated = re.search(r'`grep -rn \'"local"\\\|"hosted"\\\|"prime_rl"\' driver` \((\d+) lines in (\d+) files today', doc)
    assert stated, "the architecture map no longer states the grep's figures"
    pattern = re.compile(r'"local"|"hosted"|"prime_rl"')
    hits = {p: sum(bool(pattern.search(line)) for line in p.read_text().splitlines())
            for p in (ROOT / "driver").rglob("*") if p.is_file() and p.suffix in (".py", ".j2", ".toml", ".md")}
    assert (int(stated.group(1)), int(stated.group(2))) == (sum(hits.values()), sum(1 for n in hits.values() if n))


def test_an_arms_files_are_named_once_in_arm_files():
    """Every file of an arm's directory is joined to a path by its ArmFiles name, so the set a
    rejected attempt moves aside (ArmFiles.ATTEMPT) and every reader agree. The exceptions name
    files that only share a name: the generated package's own copy of its rows and aux rewards
    (written and checked by envs/), and prime-rl's example configs."""
    from driver.run.arm_files import ArmFiles

    names = {v for k, v in vars(ArmFiles).items() if k.isupper() and isinstance(v, str)}
    elsewhere = {"driver/envs/packages.py", "driver/envs/install.py", "driver/backends/prime_rl.py",
                 "driver/run/arm_files.py"}
    found = []
    for path in (ROOT / "driver").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in elsewhere or rel.startswith("driver/envside/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                    and isinstance(node.right, ast.Constant) and node.right.value in names):
                found.append(f"{rel}:{node.lineno} / {node.right.value!r}")
    assert not found, found


def test_a_rejected_attempt_sets_aside_every_file_arm_files_lists(tmp_path, monkeypatch):
    """One list decides what a rejected attempt leaves behind: a name added to ArmFiles.ATTEMPT
    is moved aside with the rest, and the brief's promise (TEACHER.md's list) is that list."""
    from driver.run import arm_files
    from driver import teachers

    assert teachers.SET_ASIDE is arm_files.ArmFiles.ATTEMPT   # the list TEACHER.md prints
    monkeypatch.setattr(arm_files.ArmFiles, "ATTEMPT", (*arm_files.ArmFiles.ATTEMPT, "new_output.json"))
    for name in ("weakness.json", "new_output.json", "train.log"):
        (tmp_path / name).write_text("x")
    (tmp_path / "probe").mkdir()
    moved = arm_files.set_aside_attempt(tmp_path, 2)
    assert sorted(moved) == ["new_output.json", "probe", "weakness.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "new_output.json.rejected-2", "probe.rejected-2", "train.log", "weakness.json.rejected-2"]
    assert arm_files.rejected(tmp_path, "probe", 2).is_dir()


def test_no_template_defines_a_function_the_env_side_files_define():
    """Python that must be generated lives in templates; code a generated package shares with the
    env-side files is a real file it carries a copy of (envside/hub_parts.py, row_truth.py)."""
    import re

    envside = {node.name.lstrip("_") for path in (ROOT / "driver" / "envside").glob("*.py")
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}
    for template in (ROOT / "templates").rglob("*.py.j2"):
        defined = {m.lstrip("_") for m in re.findall(r"^def (\w+)\(", template.read_text(), re.M)}
        assert not defined & envside, (template.name, sorted(defined & envside))
