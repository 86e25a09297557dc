"""tests/envside_memo.py, the in-process driver's memo of the hub env's introspection: a request
equal in request, shell and env files gets the answer the real job gave; a change to any of
them, or a failure, loads the env for real."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

import envside_memo
from conftest import ENVS
from driver.envs import envside

PY = sys.executable


@pytest.fixture
def env_dir(tmp_path, monkeypatch):
    """digit_tally (tests/envs) under another name, alone on PYTHONPATH."""
    shutil.copy(os.path.join(ENVS, "digit_tally.py"), tmp_path / "memo_probe_env.py")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


def introspect(**args):
    return envside.call(PY, envside.JOBS[envside.CLASSIC].introspect, envside.IntrospectRequest(
        env_id="memo-probe-env", env_args=args, module="memo_probe_env"))


def test_an_equal_request_gets_the_real_answer_and_a_changed_env_or_shell_is_loaded_again(
        env_dir, monkeypatch):
    real = introspect()
    with envside_memo.active():
        before = dict(envside_memo.COUNTS)
        first, second = introspect(), introspect()
        assert envside_memo.COUNTS["loaded"] - before["loaded"] == 1
        assert envside_memo.COUNTS["kept"] - before["kept"] == 1
        assert first == second == real
        second.hub.train_size = -1             # an answer handed out is the caller's to change
        assert introspect().hub.train_size == real.hub.train_size
        # the env rewritten: its system prompt changed, so is the answer
        src = env_dir / "memo_probe_env.py"
        src.write_text(src.read_text().replace("Reason inside", "Think inside"))
        changed = introspect()
        assert changed.hub.system_prompt.startswith("Think inside")
        monkeypatch.setenv("MEMO_PROBE_SETTING", "1")   # another shell: loaded again
        loaded = envside_memo.COUNTS["loaded"]
        assert introspect() == changed and envside_memo.COUNTS["loaded"] == loaded + 1
        introspect(parser_kind="think")                  # other env args: loaded again
        assert envside_memo.COUNTS["loaded"] == loaded + 2
    assert envside.call.__name__ == "call" and envside.call.__module__ == "driver.envs.envside"


def test_a_failure_is_never_kept(env_dir):
    src = env_dir / "memo_probe_env.py"
    good = src.read_text()
    src.write_text("raise ImportError('not today')\n")
    with envside_memo.active():
        for _ in range(2):
            with pytest.raises(envside.EnvsideError, match="Could not import .memo-probe-env."):
                introspect()
        src.write_text(good)
        assert introspect().hub.train_size > 0


def test_a_module_no_path_finder_finds_is_never_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert envside_memo.source_stamp("no-such-env-q7") is None
    assert envside_memo.source_stamp("memo-probe-env") is None
    (tmp_path / "memo_probe_env.py").write_text("")
    assert envside_memo.source_stamp("memo-probe-env") is not None
