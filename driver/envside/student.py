"""The env-side job that asks whether the embedded trainer can build its built-in student
(`builtin:tiny-char-qwen2?...`, embedded_trainer/recipe.py) for an environment, before a run
directory exists: `driver resume` cannot change a run's --model, so a student that cannot be
built is refused by `driver run` instead of failing iter_0.

A recipe is built from the settings it names, cached under a directory keyed by them and by the
env (recipe.model_dir_name), or shipped prebuilt. Where no built one exists the build needs, by
its corpus: `stream`, a `warm_start_corpus(count, seed, **options)` in the env's package;
`train`, train rows that carry `info.reference_completion`; and with `init=`, the named student
built already. The job reports each of these facts and leaves the verdict to the driver. It runs
in the training interpreter (the embedded trainer's), by path, importing no driver module.
"""
from __future__ import annotations

import importlib
import json


def _env_key(env_id: str, env_args: dict) -> str:
    # the key the embedded trainer warm-starts under: its first eval env block (the hub env,
    # with the run's env args) as embedded_trainer/rl.py writes it
    return json.dumps({"id": env_id, "args": env_args}, sort_keys=True)


def _reference_rows(env_id: str, env_args: dict) -> tuple[int | None, int | None, str | None]:
    """(train rows, those with a reference completion, why the env did not load)."""
    try:
        import verifiers as vf

        env = vf.load_environment(env_id, **env_args)
        rows = list(env.get_dataset() if hasattr(env, "get_dataset") else env.dataset)
    except Exception as e:  # noqa: BLE001 - the driver's introspection reports a load failure
        return None, None, f"{type(e).__name__}: {e}"
    refs = 0
    for row in rows:
        info = row.get("info")
        if isinstance(info, str):
            try:
                info = json.loads(info)
            except ValueError:
                info = None
        ref = info.get("reference_completion") if isinstance(info, dict) else None
        refs += isinstance(ref, str) and bool(ref)
    return len(rows), refs, None


def recipe(req: dict) -> dict:
    from embedded_trainer import recipe as r

    name, env_id, env_args = req["model"], req["env_id"], req.get("env_args") or {}
    out: dict = {"recipe": r.is_recipe(name), "known": r.RECIPE_PREFIX, "problem": None,
                 "corpus": None, "cached": None, "init": None, "init_found": True,
                 "module": None, "module_found": None, "warm_start_corpus": None,
                 "train_rows": None, "reference_completions": None, "load_error": None}
    if not out["recipe"]:
        return out
    try:
        spec = r.parse_recipe(name)
    except ValueError as e:
        return {**out, "problem": str(e)}
    out["corpus"] = spec["corpus"]
    target = r.model_dir_name(name, _env_key(env_id, env_args))
    for root in (r.cache_root(), r.PREBUILT):
        if (root / target / "DONE").exists():
            return {**out, "cached": str(root / target)}
    if spec["init"]:
        out["init"] = spec["init"]
        out["init_found"] = any((d / spec["init"] / "DONE").exists() for d in (r.cache_root(), r.PREBUILT))
    # the module the stream corpus is asked for, named as recipe.corpus_rows names it
    module = env_id.split("/")[-1].replace("-", "_")
    out["module"] = module
    try:
        mod = importlib.import_module(module)
        out["module_found"] = True
        out["warm_start_corpus"] = callable(getattr(mod, "warm_start_corpus", None))
    except ImportError:
        out["module_found"] = False
    if spec["corpus"] == "train" or out["warm_start_corpus"] is False:
        # corpus=train reads these; for a stream without a corpus they say whether it would work
        out["train_rows"], out["reference_completions"], out["load_error"] = \
            _reference_rows(env_id, env_args)
    return out


JOBS = {"recipe": recipe}
