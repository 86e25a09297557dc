"""Is the test suite slower than it was at an earlier commit? Runs the README's test command
(`python -m pytest`, the main suite) in a clean clone of REV with its own virtual environment
(the README's install command) and then in this working tree, back to back on the same machine,
and prints both wall times, the CPU the whole machine spent during each (Linux), and, for the
tests both trees have, the sum of their durations side by side with the ratio. On 2 cores a
suite whose machine CPU is near twice its wall time is bound by the work it does, not by
waits. On a shared machine a suite's wall time drifts by minutes over a day, so only a peer run
in the same hour says whether a change made the suite slower.

    python bench/suite_time.py --against 215f240          # about 30 minutes on 2 cores
    python bench/suite_time.py --peer-env SUITE_TRAINER_PROCESSES=1   # this tree, with and without
    python bench/suite_time.py --peer-python OTHER/.venv/bin/python   # this tree, two venvs
    python bench/suite_time.py --junit REF.xml HEAD.xml   # compare two finished runs only

--peer-env runs this working tree twice, first with the variable set (the peer), then as it is:
a switch the suite reads (SUITE_TRAINER_PROCESSES=1: every launch of the trainer double a
process tree, none in a thread; tests/conftest.py) measured against its default.
--peer-python runs this working tree first with another venv's interpreter (the peer), then
with this one: a venv that kept the generated envs of earlier suites against a fresh one. Each run says how many distributions its venv has installed when it starts.

The working tree's run uses the interpreter this script runs under (its venv must already have
the README's install); REV's clone gets a venv of its own under the scratch directory.
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ["-e", ".[test,embedded]", "-e", "environments/stock_arithmetic",
           "-e", "environments/model_router", "-e", "environments/hidden_number"]   # the README's


def durations(junit: Path) -> dict[str, float]:
    """Test id -> seconds (call + setup + teardown, as pytest's junit records them)."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        out[f"{case.get('classname')}::{case.get('name')}"] = float(case.get("time") or 0)
    return out


def machine_cpu() -> float | None:
    """Seconds of CPU the whole machine has spent busy since boot (Linux's /proc/stat: every
    state but idle and iowait), or None elsewhere: read around a suite, it counts what no
    process accounting of the suite's own tree sees (daemonised launches, killed processes)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def site_packages(python: str) -> Path:
    return Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def installed(python: str) -> int:
    """How many distributions `python`'s site-packages holds (its *.dist-info entries)."""
    return len(list(site_packages(python).glob("*.dist-info")))


def clear_driver_installs(python: str) -> int:
    """Remove the packages the driver installed (driver/envs/install.py's INSTALLER mark) from
    `python`'s site-packages; how many there were."""
    from driver.envs import install   # the README's install puts the driver in this venv

    return len(install.remove_driver_installs(site_packages(python)))


def run_suite(tree: Path, python: str, junit: Path, env: dict | None = None) -> tuple[float, float | None]:
    print(f"[{tree}] {' '.join(f'{k}={v}' for k, v in (env or {}).items())} {python} -m pytest "
          f"(junit: {junit}; {installed(python)} distributions installed)", flush=True)
    cpu0 = machine_cpu()
    t0 = time.time()
    r = subprocess.run([python, "-m", "pytest", f"--junitxml={junit}"], cwd=tree,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={**os.environ, **(env or {})})
    wall = time.time() - t0
    cpu1 = machine_cpu()
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    tail = r.stdout.strip().splitlines()[-1:] or ["(no output)"]
    print(f"[{tree}] exit {r.returncode} in {wall:.0f} s"
          + (f", the machine busy {cpu:.0f} s of CPU" if cpu is not None else "") + f": {tail[0]}", flush=True)
    if r.returncode != 0:
        sys.exit(f"the suite failed in {tree}; its output:\n{r.stdout[-4000:]}")
    return wall, cpu


def prepare_clone(rev: str, scratch: Path) -> tuple[Path, str]:
    clone = scratch / f"ref-{rev}"
    python = str(clone / ".venv" / "bin" / "python")
    if (clone / ".venv" / "installed").exists():   # a clone an earlier call of this bench made
        # REV's suite may not remove the generated envs its runs installed: without them, the
        # reused venv is as a fresh one is
        left = clear_driver_installs(python)
        print(f"[{clone}] reusing the clone and its venv ({left} generated envs of earlier runs "
              "removed from it)", flush=True)
        return clone, python
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=clone, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
    t0 = time.time()
    subprocess.run([python, "-m", "pip", "install", "-q", *INSTALL], cwd=clone, check=True)
    (clone / ".venv" / "installed").write_text(rev + "\n")
    print(f"[{clone}] installed in {time.time() - t0:.0f} s", flush=True)
    return clone, python


def report(ref: dict[str, float], head: dict[str, float], runs: tuple[tuple, tuple] | None,
           labels: tuple[str, str]) -> None:
    common = sorted(set(ref) & set(head))
    r_sum, h_sum = sum(ref[t] for t in common), sum(head[t] for t in common)
    print(f"{'':34s}{labels[0]:>14s}{labels[1]:>14s}   ratio")
    if runs:
        (r_wall, r_cpu), (h_wall, h_cpu) = runs
        print(f"{'wall time of the main suite (s)':34s}{r_wall:14.0f}{h_wall:14.0f}   {h_wall / r_wall:.2f}")
        if r_cpu and h_cpu:   # the machine's, so whatever else ran meanwhile is in it too
            print(f"{'CPU the machine spent (s)':34s}{r_cpu:14.0f}{h_cpu:14.0f}   {h_cpu / r_cpu:.2f}")
    print(f"{'tests':34s}{len(ref):14d}{len(head):14d}")
    print(f"{'sum of all test durations (s)':34s}{sum(ref.values()):14.0f}{sum(head.values()):14.0f}"
          f"   {sum(head.values()) / max(sum(ref.values()), 1e-9):.2f}")
    print(f"{f'the {len(common)} tests both have (s)':34s}{r_sum:14.0f}{h_sum:14.0f}   {h_sum / max(r_sum, 1e-9):.2f}")
    only = collections.Counter({t: head[t] for t in set(head) - set(ref)})
    print(f"{'tests only in ' + labels[1] + ' (s)':34s}{'':14s}{sum(only.values()):14.0f}")
    files = collections.Counter()
    for t in common:
        files[t.split("::")[0]] += head[t] - ref[t]
    print("the files whose common tests changed most (seconds, " + labels[1] + " - " + labels[0] + "):")
    for f, d in sorted(files.items(), key=lambda kv: -abs(kv[1]))[:6]:
        print(f"  {d:+7.1f}  {f}")
    print("the slowest tests only in " + labels[1] + ":")
    for t, s in only.most_common(6):
        print(f"  {s:7.1f}  {t}")
    print("durations are per test as pytest-xdist records them (two workers share the cores, so "
          "a test's seconds include its neighbour's load); the wall times are the ones to compare.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", metavar="REV", help="the earlier commit to run the suite at")
    ap.add_argument("--junit", nargs=2, metavar=("REF", "HEAD"), type=Path,
                    help="two finished runs' junit files: compare them without running anything")
    ap.add_argument("--peer-env", metavar="NAME=VALUE",
                    help="run this working tree with NAME=VALUE set as the peer, then as it is")
    ap.add_argument("--peer-python", metavar="PYTHON",
                    help="run this working tree with PYTHON (another venv's) as the peer, then with this one")
    ap.add_argument("--scratch", type=Path, help="where REV's clone goes (default: a temp dir); "
                    "a clone this bench made there before is reused, the generated envs its earlier "
                    "runs installed removed from its venv")
    a = ap.parse_args()
    if a.junit:
        report(durations(a.junit[0]), durations(a.junit[1]), None, ("REF", "HEAD"))
        return 0
    scratch = a.scratch or Path(tempfile.mkdtemp(prefix="suite-time-"))
    if a.peer_env:
        name, sep, value = a.peer_env.partition("=")
        if not sep or not name:
            ap.error("--peer-env takes NAME=VALUE")
        ref_run = run_suite(ROOT, sys.executable, scratch / "ref.xml", {name: value})
        head_run = run_suite(ROOT, sys.executable, scratch / "head.xml")
        report(durations(scratch / "ref.xml"), durations(scratch / "head.xml"), (ref_run, head_run),
               (a.peer_env[:13], "as it is"))
        return 0
    if a.peer_python:
        ref_run = run_suite(ROOT, a.peer_python, scratch / "ref.xml")
        head_run = run_suite(ROOT, sys.executable, scratch / "head.xml")
        report(durations(scratch / "ref.xml"), durations(scratch / "head.xml"), (ref_run, head_run),
               ("peer python", "this python"))
        return 0
    if not a.against:
        ap.error("give --against REV, --peer-env NAME=VALUE, --peer-python PYTHON or --junit REF.xml HEAD.xml")
    clone, python = prepare_clone(a.against, scratch)
    ref_run = run_suite(clone, python, scratch / "ref.xml")
    head_run = run_suite(ROOT, sys.executable, scratch / "head.xml")
    report(durations(scratch / "ref.xml"), durations(scratch / "head.xml"), (ref_run, head_run),
           (a.against[:10], "working tree"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
