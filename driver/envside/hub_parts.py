"""What a generated env takes from the hub env: the class it is built on and the hub's
constructor settings. One file for both places that decide it: introspection (classic.py and
episodes.py, run by path in the training interpreter, import it as a sibling), which records the
choice in hub_env.json, and every generated env package, which carries a copy of this file and
makes the same choice when it loads (templates/classic/env_module.py.j2). Imports nothing of
the driver.
"""
from __future__ import annotations

import inspect
import json

import verifiers as vf

# the constructor settings of verifiers' own environments that shape an episode
SETTINGS = ("max_turns", "timeout_seconds", "max_seq_len", "max_total_completion_tokens",
            "sampling_args", "message_type")
# what verifiers' Environment keeps on every instance that is not an episode setting: the
# parts a generated env gets from the hub by construction, and verifiers' own bookkeeping
NOT_SETTINGS = {"dataset", "eval_dataset", "dataset_source", "eval_dataset_source", "parser",
                "rubric", "system_prompt", "few_shot", "logger", "env_id", "env_args", "env_client",
                "env_server_process", "death_pipe_writer", "map_kwargs", "max_workers",
                "pass_threshold", "rollouts_per_example", "score_rollouts", "tool_defs"}
MAX_SETTING_CHARS = 2000


def takes(cls, name: str) -> bool:
    """Whether constructing `cls` takes an argument `name`: a parameter of that name in the first
    __init__ along its MRO, or **kwargs handed on to the next __init__ that has one."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return False
        if name in params:
            return True
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return False
    return False


def env_class(hub) -> tuple[type | None, str]:
    """(the class a generated env of `hub` is built on, why); None where it cannot be built:
    a class that builds its own data and is not single-turn cannot be given other rows, and a
    single-turn stand-in would not play the hub's turns."""
    cls = type(hub)
    if takes(cls, "dataset"):
        return cls, f"{cls.__name__} takes a dataset argument: the hub's own class, given the generated rows"
    if isinstance(hub, vf.SingleTurnEnv):
        return vf.SingleTurnEnv, (f"{cls.__name__}.__init__ takes no dataset argument (it builds its own "
                                  "data): verifiers' single-turn class, with the hub's parser, rubric "
                                  "and system prompt")
    return None, (f"{cls.__module__}.{cls.__name__} takes no dataset argument (it builds its own data) "
                  "and is not a single-turn environment: a generated environment cannot give it other "
                  "rows, and a single-turn one would not play the hub's turns")


def _plain(value) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def settings(env) -> dict:
    """The env's constructor settings as they stand on it: verifiers' own (SETTINGS), and every
    other plain value the env keeps as an attribute (its class's constructor arguments, or
    keyword arguments verifiers set as attributes): what its env_response and stop conditions
    may read. A generated env sets each again."""
    out = {k: getattr(env, k) for k in SETTINGS if hasattr(env, k) and _plain(getattr(env, k))}
    for name, value in vars(env).items():
        if name.startswith("_") or name in out or name in NOT_SETTINGS or not _plain(value):
            continue
        if len(json.dumps(value)) <= MAX_SETTING_CHARS:
            out[name] = value
    return out
