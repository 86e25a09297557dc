"""The guard a teacher's generator runs under: `python generator_guard.py gen_dataset.py`, with
the generator's own directory as the working directory (driver/teachers/generator_run.py starts
it by path).

It installs a Python audit hook that stops the script from writing outside its directory,
opening network connections or starting other programs, then runs the script as `python
gen_dataset.py` would. A seat belt against mistakes (a generator that writes into another
iteration, or fetches data), not a security boundary against hostile code. Standard library
only.
"""
from __future__ import annotations

import os
import runpy
import sys

ROOT = os.path.realpath(os.getcwd())
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_HARMLESS = {os.devnull, "/dev/stdout", "/dev/stderr"}
_PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
                "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,),
                "os.chown": (0,), "os.utime": (0,), "os.chdir": (0,), "shutil.rmtree": (0,),
                "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (1,)}
_PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                   "os.fork", "os.forkpty", "pty.spawn")
_busy: list = []


def _inside(p) -> bool:
    if p is None or isinstance(p, int):
        return True
    rp = os.path.realpath(os.path.join(os.getcwd(), os.fsdecode(p)))
    return rp == ROOT or rp.startswith(ROOT + os.sep) or rp in _HARMLESS


def _deny(what: str):
    raise PermissionError(f"generator blocked: {what}. A generator may write only inside its "
                          f"own directory ({ROOT}), and may not use the network or start programs.")


def _hook(event: str, args: tuple) -> None:
    if _busy:
        return
    _busy.append(1)
    try:
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE)
            if writing and not _inside(path):
                _deny(f"writing {os.fsdecode(path)!r} outside its directory")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and not _inside(args[i]):
                    _deny(f"{event} on {os.fsdecode(args[i])!r} outside its directory")
        elif event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
            _deny(f"network access ({event})")
        elif event in _PROCESS_EVENTS:
            _deny(f"starting a program ({event})")
    finally:
        _busy.pop()


def main() -> None:
    sys.dont_write_bytecode = True
    script = sys.argv[1]
    # as `python gen_dataset.py`: the script's folder first on sys.path, not this file's
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    sys.addaudithook(_hook)
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
