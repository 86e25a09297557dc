"""Import stubs for the packages prime-rl imports that cannot exist on a CPU machine.

Installed into prime-rl's test interpreter as `prl_import_stubs` (tools/prime_rl_testenv.py) and
loaded by a .pth file, so every process prime-rl starts (launcher, orchestrator, env servers,
evals) has them. They answer only for the top-level names in $PRL_STUBS (current: vllm,
torchtitan, ring_flash_attn; classic: torchtitan, ring_flash_attn), and only where the real
package is not importable. Nothing prime-rl runs on the CPU path calls into them: they exist so
that module-level imports (the trainer's model tree, pulled in by the orchestrator's tokenizer
set-up; vllm's NCCL transport in current's weights package) succeed.

triton and flash_attn are never stubbed: torch probes triton by find_spec and then type-checks
its objects (a stub breaks torch.utils.flop_counter), and transformers reads flash_attn's
distribution metadata (a stub raises KeyError there). triton is installed real; flash_attn is
left absent, which prime-rl already guards.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types


class _Anything:
    """A value that survives whatever module-level code does with an imported name."""

    def __init__(self, name: str = "stub"):
        self._name = name

    def __call__(self, *args, **kwargs):
        # a bare decorator (@jit, @expert_parallel) hands back what it decorates
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Anything):
            return args[0]
        return _Anything(self._name + "()")

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self._name}.{name}")

    def __getitem__(self, key):
        return _Anything(f"{self._name}[]")

    def __mro_entries__(self, bases):
        # `class X(stubbed.Base)` gets an empty base of its own
        return (type(self._name.rsplit(".", 1)[-1], (), {}),)

    def __or__(self, other):
        return self

    __ror__ = __or__

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter(())

    def __repr__(self) -> str:
        return f"<import stub {self._name}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: set[str]):
        self.names = names
        self._asking = False

    def _real_exists(self, top: str) -> bool:
        if self._asking:
            return False
        self._asking = True
        try:
            return importlib.machinery.PathFinder.find_spec(top) is not None
        finally:
            self._asking = False

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top not in self.names or self._asking:
            return None
        if top == fullname and self._real_exists(top):
            return None
        if top != fullname and not isinstance(sys.modules.get(top), _StubModule):
            return None
        spec = importlib.util.spec_from_loader(fullname, self, is_package=True)
        return spec

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__prl_stub__ = True
        return m

    def exec_module(self, module):
        pass


def install() -> None:
    names = {n.strip() for n in os.environ.get("PRL_STUBS", "vllm,torchtitan,ring_flash_attn").split(",") if n.strip()}
    names -= {"triton", "flash_attn"}
    if names and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder(names))   # last: a real package always wins


install()
