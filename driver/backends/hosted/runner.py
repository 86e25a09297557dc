"""The hosted runner: a launch is a hosted run, submitted once, found again after a crash, polled
on `prime train get/progress` JSON (never a log), read back from the volume when it ends, and
stopped with `prime train stop`."""
from __future__ import annotations

import json
import os
import re
import secrets
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from driver import clock, faults
from driver.backends.base import Command
from driver.backends.hosted.cli import CLIError, PrimeCLI, error_text, parse_json
from driver.backends.hosted.records import (
    EVAL_KIND,
    REMOTE,
    VOLUME_MOUNT,
    arm_dir_of,
    read_record,
    record_cost,
    run_dir_of,
    say,
    write_record,
)
from driver.backends.hosted.submission import (
    check_submission,
    eval_config,
    train_config,
)
from driver.backends.process import (
    Limits,
    PollResult,
    count_lines,
    exit_status,
    rc_path,
)
from driver.errors import DriverError, StillRunning
from driver.run.files import atomic_write_json, atomic_write_text
from driver.run.model import TrainerProcess
from driver.run.rundir import RunDir, now
from rl_contract.current import RUN_NAME, CurrentLayout

SECRETS = ("WANDB_API_KEY", "HF_TOKEN")  # the only secrets a dedicated run accepts
TRANSIENT_FAILURES = 20                 # consecutive failed status reads before the run counts as lost
TRAIN_RESUME_SINCE = "0.16.0"           # the first CLI with `prime train resume` (0.15.0 has none)
TERMINAL = {"STOPPED", "FAILED", "COMPLETED", "PAUSED"}   # commands/rl.py:117@0.18.0
_LAYOUT = CurrentLayout()


def lost_after() -> int:
    """Consecutive failed `prime train get` reads after which a run counts as lost (then it is
    stopped by id and its cost recorded before anything else is launched)."""
    return int(os.environ.get("DRIVER_HOSTED_LOST_AFTER", str(TRANSIENT_FAILURES)))


def poll_floor_s() -> float:
    """The least time between two polls of a hosted run (each one is an API call)."""
    return float(os.environ.get("DRIVER_HOSTED_POLL_S", "30"))



@dataclass(frozen=True)
class HostedRunner:
    """Launches are hosted runs: submitted once, found again by the id recorded right after
    submission (or, if the driver died before that, by their unique name), polled on
    `prime train get/progress` JSON, read back from the volume when they end, stopped with
    `prime train stop`."""
    cli: PrimeCLI
    cli_version: str = "0.18.0"

    # ---- Runner -------------------------------------------------------------------------------
    def find(self, recorded: TrainerProcess | None, out: Path) -> TrainerProcess | None:
        rec = read_record(out)
        if rec is None or rec.get("settled"):
            return None
        if not rec["run_ids"]:
            # submitted (or about to be) when the driver died, its id never recorded
            found = self._by_name(rec["name"])
            if found is None:
                rec.update(settled=True, outcome="never reached the platform")
                write_record(out, rec)
                return None
            rec["run_ids"].append(found)
            write_record(out, rec)
        return self._process(rec, out)

    def launch(self, command: Command, args: list[str], out: Path, log: Path) -> TrainerProcess:
        kind = "eval" if command.argv[-1] == EVAL_KIND else "train"
        run_dir = run_dir_of(out)
        state = RunDir(run_dir).load()
        arm = arm_dir_of(out, run_dir)
        log.parent.mkdir(parents=True, exist_ok=True)
        cfg = train_config(args, run_dir, state, log) if kind == "train" else eval_config(args, run_dir, state)
        # the gradient probe is a one-step training launch in the arm's probe/ folder
        label, home = ("probe", Path(out).parent) if Path(out).parent.name == "probe" else (kind, arm)
        name = f"ssi-{state.env_tag or 'run'}-{arm.name}-{label}-{secrets.token_hex(3)}"
        cfg = {"name": name, **cfg}
        check_submission(cfg)
        path = home / f"hosted_{kind}.toml"
        atomic_write_text(path, f"# {arm.name}: the {kind} run submitted to Hosted Training "
                                f"(`prime train`), composed from {' '.join(a for a in args if a.endswith('.toml'))}\n"
                          + tomli_w.dumps(cfg))
        rec: dict[str, Any] = {"name": name, "kind": kind, "label": label, "arm": arm.name, "config": str(path),
                               "volume": state.hosted_volume, "run_ids": [], "resumed_from": [],
                               "submitted_ts": now(), "settled": False}
        write_record(out, rec)   # before submitting: a driver killed in between finds it by name
        self._submit(rec, out, log)
        return self._process(rec, out)

    def exit_status(self, log: Path) -> int | None:
        return exit_status(log)

    def poll(self, tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
             limits: Limits, steps: int, progress: Callable[[], int], interval: float,
             on_tick: Callable[[int], None] | None,
             growing: Callable[[], Iterable[Path]] | None = None) -> PollResult:
        # `growing` names local files; a hosted run's are on its volume until it ends, and
        # only the platform's step count is seen while it runs
        if tp is None:
            return PollResult("failed", None, count_lines(eval_file), "no hosted run to poll")
        out = Path(tp.output_dir)
        rec = read_record(out)
        if rec is None:
            return PollResult("failed", None, 0, f"the record of hosted run {tp.run_id} is gone")
        interval = max(interval, poll_floor_s())
        base = tp.start_step if rec["kind"] == "train" else 0
        last_step: int | None = None
        last_change = queued_since = clock.monotonic()
        running_since: float | None = None
        failures = 0
        while True:
            run_id = rec["run_ids"][-1]
            try:
                run = self.cli.json("train", "get", run_id, "-o", "json", timeout=120)["run"]
                failures = 0
            except (CLIError, ValueError, KeyError, TypeError) as e:
                failures += 1
                if failures >= lost_after():
                    # lost track of it: it may run (and bill) on. The caller stops it by id
                    # (`prime train stop`) and records its cost before anything else is launched
                    say(log, f"run {run_id}: `prime train get` failed {failures} times in a row ({e})")
                    return PollResult("stalled", None, 0, f"lost track of hosted run {run_id}: `prime "
                                      f"train get` failed {failures} times in a row ({e})")
                clock.sleep(interval)
                continue
            status = str(run.get("status") or "").upper()
            seen = rec.setdefault("runs", {}).setdefault(run_id, {})
            times = {k: run.get(k) for k in ("created_at", "started_at", "completed_at", "gpu_count") if run.get(k)}
            if status != rec.get("status") or any(seen.get(k) != v for k, v in times.items()):
                seen.update(times)   # the billed time's ends, as the platform reports them
                if status != rec.get("status"):
                    say(log, f"run {run_id}: {status}" + (f" ({run['queue_reason']})" if run.get("queue_reason") else ""))
                rec["status"] = status
                write_record(out, rec)
            if status == "COMPLETED":
                return self._completed(rec, out, log, tp, eval_file, expected_rows)
            if status in ("FAILED", "STOPPED"):
                return self._ended(rec, out, log, status, platform_reason(run))
            if status == "PAUSED":
                # a paused run is continued by a new one from its own last checkpoint, on its
                # volume, never from the checkpoint the arm started from
                self._continue(rec, out, log, run_id)
                running_since, last_step, queued_since = None, None, clock.monotonic()
                continue
            t = clock.monotonic()
            # waiting in the queue is not counted against the limits; RUNNING is, and so is a
            # status this CLI version does not know (the platform may add one). Silence is
            # measured from the first running poll, a continuation's too ("Runs may queue":
            # commands/rl.py:1456@0.18.0; a new run prints latest_step null until its first step)
            if status not in ("QUEUED", "PENDING", "PAUSING"):
                if running_since is None:
                    running_since = last_change = t
                    say(log, f"run {run_id}: running after {t - queued_since:.0f}s queued")
                step = self._latest_step(run_id)
                if step != last_step:
                    last_step, last_change = step, t
                    if step is not None:
                        say(log, f"run {run_id}: step {step}")
                    if step is not None and step > base and "first_step_at" not in seen:
                        seen["first_step_at"] = now()   # its start-up, measured (the probe's estimate)
                        write_record(out, rec)
                done = max(0, (last_step or 0) - base)
                silent = t - last_change
                stalled = None
                if steps and done == 0 and silent >= limits.startup_s:
                    stalled = f"no train step within {limits.startup_s:.0f}s of running (--startup-timeout)"
                elif 0 < done < steps and silent >= limits.stall_s:
                    stalled = f"no new train step for {limits.stall_s:.0f}s (--stall-timeout)"
                elif done >= steps and silent >= (limits.eval_s if steps else limits.startup_s + limits.eval_s):
                    stalled = f"not finished {silent:.0f}s after its last step (--eval-timeout)"
                if stalled:
                    return PollResult("stalled", None, 0, f"hosted run {run_id}: {stalled}")
                if t - running_since >= limits.cap_s(steps):
                    return PollResult("timeout", None, 0, f"hosted run {run_id} still running after "
                                      f"{limits.cap_s(steps):.0f}s, the longest a working arm takes")
            if on_tick:
                on_tick(0)
            clock.sleep(interval)

    def stop(self, tp: TrainerProcess) -> None:
        """`prime train stop RUN -f`, confirmed: the CLI prints the run's status once the stop has
        gone through (commands/rl.py:1795-1806@0.18.0). A stop the platform did not confirm
        raises StillRunning, which ends the driver: nothing else is launched while the run may
        still run and bill."""
        out = Path(tp.output_dir)
        rec = read_record(out)
        run_id = tp.run_id or (rec or {}).get("run_ids", [None])[-1]
        if run_id is None:
            return
        r = self.cli.run("train", "stop", run_id, "-f", timeout=300)
        m = re.search(r"^Status: (\S+)", r.stdout, re.M)
        status = m.group(1).upper() if m else None
        if r.returncode != 0 or status not in TERMINAL:
            raise StillRunning(
                f"`prime train stop {run_id} -f` did not confirm the run stopped "
                f"({error_text(r) if r.returncode else 'status ' + str(status)}): it may still run and "
                f"bill. Check it with `prime train get {run_id}` and stop it (`prime train stop "
                f"{run_id}`), then `driver resume`; no other run is submitted until then.")
        if rec is not None and status == "COMPLETED":
            # it finished before the stop reached it ("reached a terminal state before the stop
            # completed", commands/rl.py:1798-1806@0.18.0): its outputs are whole, so it stays
            # unsettled and the next poll (this arm's resume) fetches them rather than retrain it
            log = self._log_of(rec, out)
            rec["status"] = None
            write_record(out, rec)
            say(log, f"run {run_id}: completed before the stop reached it; its outputs are fetched "
                     "when the arm is resumed, not trained again")
            return
        if rec is not None:
            log = self._log_of(rec, out)
            say(log, f"run {run_id}: stopped by the driver ({status})")
            rec.setdefault("runs", {}).setdefault(run_id, {}).setdefault("stopped_at", now())
            self._settle(rec, out, log, 1, "stopped by the driver")

    # ---- helpers ------------------------------------------------------------------------------
    def _process(self, rec: dict, out: Path) -> TrainerProcess:
        return TrainerProcess(pid=0, create_time=0.0, output_dir=str(out), config_paths=[rec["config"]],
                              launched_ts=rec["submitted_ts"], run_id=rec["run_ids"][-1])

    def _log_of(self, rec: dict, out: Path) -> Path:
        return Path(rec.get("log") or Path(out) / "hosted.log")

    def _submit(self, rec: dict, out: Path, log: Path, resume_from: str | None = None,
                config: str | None = None) -> str:
        args = ["train", config or rec["config"], "--yes", "--output", "json", "--volume", rec["volume"]]
        for key in SECRETS:
            if os.environ.get(key):
                args += ["-e", key]
        if resume_from:
            args += ["--resume-from", resume_from]
        rec["log"] = str(log)
        try:
            r = self.cli.run(*args)
            why = None if r.returncode == 0 else error_text(r)
        except CLIError as e:   # the driver's own wait for the CLI ran out
            r, why = None, str(e)
        faults.point("hosted:after-submit")
        if why is not None:
            # a create that timed out, a 5xx, a dropped connection: the platform may have made
            # the run all the same (commands/rl.py:757-768@0.18.0), so it is looked up by its
            # unique name before the submission is settled as refused
            adopted = self._adopt(rec, out, log, why) if not resume_from else None
            if adopted:
                return adopted
            say(log, f"`prime train` refused {Path(rec['config']).name}: {why}")
            if not resume_from:
                rec.update(settled=True, outcome="refused at submission")
                write_record(out, rec)
            raise DriverError(f"[{rec['arm']}] `prime train {Path(rec['config']).name}` failed: {why}")
        return self._dispatched(rec, out, log, r, resume_from)

    def _adopt(self, rec: dict, out: Path, log: Path, why: str) -> str | None:
        """The run a failed submission made after all, found by its name, recorded as if its
        dispatch had answered (no rate quoted: its placement is unknown); None where the platform
        lists none. A listing that fails leaves the outcome unknown: the record stays unsettled,
        and `driver resume` looks the name up again before submitting anything."""
        try:
            found = self._by_name(rec["name"])
        except (CLIError, ValueError, AttributeError) as e:
            say(log, f"`prime train` failed ({why}) and the run list could not be read ({e})")
            # the run may be live: a control phase must not submit the next control beside it
            raise StillRunning(f"[{rec['arm']}] `prime train` failed ({why}), and whether the platform "
                              f"made run {rec['name']} is unknown: `prime train list` failed ({e}). "
                              "`driver resume` looks it up again before submitting anything.") from None
        if found is None or found in rec["run_ids"]:
            return None
        rec["run_ids"].append(found)
        rec.setdefault("runs", {})[found] = {"dispatched_at": now(), "placement": {}}
        rec["status"] = None
        write_record(out, rec)
        say(log, f"`prime train` failed ({why}), but the platform made run {found} as {rec['name']}: "
                 "tracking it (one run, billed once)")
        return found

    def _dispatched(self, rec: dict, out: Path, log: Path, r: Any, resume_from: str | None) -> str:
        """The run id and placement a dispatch printed (`{"run": {runId, onDemand?, gpuType?,
        pricePerGpuHour?, estimatedCostPerHour?, isBeta?}}`, commands/rl.py:772-791@0.18.0),
        recorded before anything else happens."""
        try:
            answer = parse_json(r.stdout)["run"]
            run_id = str(answer["runId"])
        except (ValueError, KeyError, TypeError):
            # it exited 0: the run was made, and only its answer is unreadable
            if not resume_from and (found := self._adopt(rec, out, log, "its answer printed no run id")):
                return found
            raise StillRunning(f"[{rec['arm']}] `prime train` exited 0 but printed no run id, and no "
                               f"run named {rec['name']} is listed: it may still run and bill. Check "
                               "`prime train list`, stop it if it is there, then `driver resume`: "
                               f"{r.stdout[-300:]}") from None
        rec["run_ids"].append(run_id)
        if resume_from:
            rec["resumed_from"].append(resume_from)
        rec.setdefault("runs", {})[run_id] = {"dispatched_at": now(), "placement": {k: answer.get(k) for k in (
            "onDemand", "gpuType", "pricePerGpuHour", "estimatedCostPerHour") if k in answer}}
        rec["status"] = None
        write_record(out, rec)   # the id is recorded before anything else happens
        rate = answer.get("estimatedCostPerHour")
        say(log, f"submitted {rec['name']} as run {run_id}" +
            (f", continuing paused run {resume_from}" if resume_from else "") +
            f" (volume {rec['volume']}, config {rec['config']}); " +
            (f"on demand on {answer.get('gpuType')} at ${answer.get('pricePerGpuHour')}/GPU-hour, "
             f"about ${rate}/hour from when its pods are ready" if answer.get("onDemand")
             else "reserved capacity: no hourly rate quoted"))
        return run_id

    def _continue(self, rec: dict, out: Path, log: Path, paused: str) -> str:
        """Continue a PAUSED run from its own last checkpoint: `prime train resume RUN`, which
        reuses the paused run's stored config (commands/rl.py:1841-1909@0.18.0; from 0.16.0);
        on 0.15.x, a new submission with `--resume-from RUN` whose config's [resume] dir names
        that paused run's last checkpoint on the volume, so however the platform combines the
        two (api/training.py:702-703@0.18.0 leaves it to the server) the arm goes on from where
        it paused and no step is trained, or billed, twice."""
        from packaging.version import Version

        # a continuation submitted before the driver died, its id never recorded: adopt it
        data = self.cli.json("train", "list", "-n", "100", "-o", "json", timeout=120)
        known = [str(r["id"]) for r in data.get("runs") or [] if isinstance(r, dict)
                 and r.get("name") == rec["name"] and str(r.get("id")) not in rec["run_ids"]]
        if known:
            rec["run_ids"].append(known[0])
            rec["resumed_from"].append(paused)
            runs = rec.setdefault("runs", {})   # its rate: the paused run's (same config and GPU type)
            runs.setdefault(known[0], {"dispatched_at": now(),
                                       "placement": (runs.get(paused) or {}).get("placement") or {}})
            rec["status"] = None
            write_record(out, rec)
            say(log, f"found run {known[0]}, continuing paused run {paused}, submitted before a restart")
            return known[0]
        if Version(self.cli_version) >= Version(TRAIN_RESUME_SINCE):
            args = ["train", "resume", paused, "--yes", "--output", "json"]
            for key in SECRETS:
                if os.environ.get(key):
                    args += ["-e", key]
            r = self.cli.run(*args)
            faults.point("hosted:after-submit")
            if r.returncode != 0:
                say(log, f"`prime train resume {paused}` failed: {error_text(r)}")
                raise DriverError(f"[{rec['arm']}] `prime train resume {paused}` failed: "
                                  f"{error_text(r)}; `driver resume` tries again")
            return self._dispatched(rec, out, log, r, paused)
        files = self._listing(rec["volume"], paused)
        root = run_root(files, paused)
        steps = sorted(int(m.group(1)) for f in files if root and (m := re.match(
            re.escape(root) + r"/checkpoints/step_(\d+)/", f)))
        if not steps:
            raise DriverError(f"[{rec['arm']}] paused run {paused} left no checkpoint on volume "
                              f"{rec['volume']} ({self._holds(files)}); it cannot be continued. "
                              "Retrain the arm: `driver resume` after removing its prime_out/")
        cfg = tomllib.loads(Path(rec["config"]).read_text())
        cfg["resume"] = {"dir": f"{VOLUME_MOUNT}/{root}/checkpoints/step_{steps[-1]}"}
        path = Path(rec["config"]).with_name(Path(rec["config"]).stem + f"_resume_{paused}.toml")
        atomic_write_text(path, f"# {rec['arm']}: continues paused run {paused} from its last "
                                f"checkpoint (step {steps[-1]})\n" + tomli_w.dumps(cfg))
        return self._submit(rec, out, log, resume_from=paused, config=str(path))

    def _by_name(self, name: str) -> str | None:
        data = self.cli.json("train", "list", "-n", "100", "-o", "json", timeout=120)
        hits = [r for r in data.get("runs") or [] if isinstance(r, dict) and r.get("name") == name]
        return str(hits[0]["id"]) if hits else None

    def _latest_step(self, run_id: str) -> int | None:
        try:
            step = self.cli.json("train", "progress", run_id, timeout=120).get("latest_step")
        except (CLIError, ValueError, AttributeError):
            return None
        return int(step) if isinstance(step, int) else None

    def _listing(self, volume: str, run_id: str) -> list[str]:
        """Every file of a run on the volume (paths relative to the volume root)."""
        entries = self.cli.json("volumes", "ls", volume, f"runs/{run_id}/", "-R", "-o", "json")
        return [str(e["path"]) for e in entries if isinstance(e, dict) and e.get("type") == "file"]

    def _get(self, volume: str, remote: str, local: Path) -> None:
        """Download one file, atomically: it is at `local` complete, or not at all."""
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(local.name + ".part")
        tmp.unlink(missing_ok=True)
        r = self.cli.run("volumes", "get", volume, remote, str(tmp))
        if r.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            raise DriverError(f"`prime volumes get {volume} {remote}` failed: {error_text(r)}; "
                              "`driver resume` downloads it again")
        os.replace(tmp, local)

    def _roots(self, rec: dict) -> tuple[dict[str, tuple[str, list[str]]], list[str]]:
        """Each run of the launch: its prime-rl run dir R on the volume, found in the listing
        (where inside runs/<runId>/ the platform puts it, the CLI does not say), and its files;
        and the last run's listing."""
        out, files = {}, []
        for run_id in rec["run_ids"]:
            files = self._listing(rec["volume"], run_id)
            root = run_root(files, run_id)
            if root is not None:
                out[run_id] = (root, files)
        return out, files

    @staticmethod
    def _holds(files: list[str]) -> str:
        """What a run's listing holds, in a line: nothing, or its first paths."""
        if not files:
            return "nothing"
        shown = ", ".join(files[:8])
        return f"{len(files)} files: {shown}" + (", ..." if len(files) > 8 else "")

    def _completed(self, rec: dict, out: Path, log: Path, tp: TrainerProcess, eval_file: Path,
                   expected_rows: int) -> PollResult:
        roots, listed = self._roots(rec)
        if not roots:
            held = self._holds(listed)
            say(log, f"the run left no prime-rl run directory on volume {rec['volume']}; "
                     f"runs/{rec['run_ids'][-1]}/ holds {held}")
            return self._settle(rec, out, log, 1, f"hosted run {rec['run_ids'][-1]} completed but left "
                                f"no rollouts or checkpoints (rollouts|checkpoints|broadcasts/step_N/) "
                                f"under runs/{rec['run_ids'][-1]}/ on volume {rec['volume']}; it holds "
                                f"{held}")
        rec["root"] = roots[max(roots, key=rec["run_ids"].index)][0]
        write_record(out, rec)
        faults.point("hosted:before-download")
        if rec["kind"] == "train":
            self._download_train(rec, out, tp, roots, log)
            return self._settle(rec, out, log, 0, "")
        rows = self._download_eval(rec, eval_file, roots)
        if rows < expected_rows:
            return self._settle(rec, out, log, 1, f"the eval run wrote {rows}/{expected_rows} eval rows")
        return self._settle(rec, out, log, 0, "", rows)

    def _download_train(self, rec: dict, out: Path, tp: TrainerProcess,
                        roots: dict[str, tuple[str, list[str]]], log: Path) -> None:
        """The train rollouts of every new step (the teacher's evidence, the train reward) and,
        for the final step's checkpoint trees, where they are on the volume."""
        final = tp.final_step or 0
        order = sorted(roots, key=rec["run_ids"].index)   # a later run of the chain wins
        for step in _LAYOUT.launch_train_steps(tp.start_step, final):   # rl_contract's window
            rel = _LAYOUT.train_file(Path(), step).relative_to(_LAYOUT.run_dir(Path())).as_posix()
            src = next((f"{roots[r][0]}/{rel}" for r in reversed(order)
                        if f"{roots[r][0]}/{rel}" in roots[r][1]), None)
            local = _LAYOUT.train_file(out, step)
            if src and not local.exists():
                self._get(rec["volume"], src, local)
        for tree in _LAYOUT.checkpoint_trees(out, final):
            rel = tree.relative_to(Path(out) / RUN_NAME).as_posix()
            for r in reversed(order):
                root, files = roots[r]
                inside = [f for f in files if f.startswith(f"{root}/{rel}/")]
                if inside:
                    tree.mkdir(parents=True, exist_ok=True)
                    atomic_write_json(tree / REMOTE, {"volume": rec["volume"], "path": f"{root}/{rel}",
                                                      "run_id": r, "files": len(inside),
                                                      "get": f"prime volumes get {rec['volume']} {root}/{rel}"})
                    break
        say(log, f"read back {final - tp.start_step} steps of train rollouts; the final "
                 f"checkpoint stays on volume {rec['volume']} under {rec['root']}")

    def _download_eval(self, rec: dict, eval_file: Path,
                       roots: dict[str, tuple[str, list[str]]]) -> int:
        """The startup eval of the eval run, cut to its numbers as it is read."""
        found = sorted((int(m.group(1)), f) for r in roots for f in roots[r][1]
                       if (m := re.fullmatch(re.escape(roots[r][0]) + r"/rollouts/step_(\d+)/eval/all/traces\.jsonl", f)))
        if not found:
            return 0
        tmp = eval_file.with_name(eval_file.name + ".remote")
        self._get(rec["volume"], found[0][1], tmp)
        try:
            lines = [json.dumps(numbers_only(json.loads(line))) + "\n"
                     for line in tmp.read_text().splitlines() if line.strip()]
        except ValueError as e:
            raise DriverError(f"the eval run's traces are not JSON lines ({e})") from None
        finally:
            tmp.unlink(missing_ok=True)
        atomic_write_text(eval_file, "".join(lines))
        return len(lines)

    def _ended(self, rec: dict, out: Path, log: Path, status: str, reason: str) -> PollResult:
        say(log, f"run {rec['run_ids'][-1]}: {status}: {reason}")
        return self._settle(rec, out, log, 1, f"Hosted Training reports run {rec['run_ids'][-1]} "
                                              f"{status}: {reason}")

    def _settle(self, rec: dict, out: Path, log: Path, rc: int, detail: str, rows: int = 0) -> PollResult:
        """The launch has ended: its cost into the ledger, its exit status beside its log."""
        views = [self._bill(rec, run_id, log) for run_id in rec["run_ids"]]
        entry = ledger_entry(rec, views, "completed" if rc == 0 else "failed")
        record_cost(run_dir_of(out), rec["name"], entry)
        rec.update(settled=True, outcome=detail or "completed", cost_usd=entry["cost_usd"])
        write_record(out, rec)
        atomic_write_text(rc_path(log), f"{rc}\n")
        say(log, f"{rec['kind']} launch ended ({'ok' if rc == 0 else detail}); cost ${entry['cost_usd']:.4f} "
                 f"(GPU-hours: {entry['gpu_hours']:.4f} h, " +
            (f"${entry['gpu_hour_usd']:.4f} at the dispatch rate" if entry["gpu_hour_usd"] is not None
             else "no hourly rate: reserved capacity") +
            "; `prime train usage`: " +
            (f"${entry['usage_usd']:.4f})" if entry["usage_usd"] is not None else "unavailable)"))
        return PollResult("done" if rc == 0 else "failed", rc, rows, detail)

    def _bill(self, rec: dict, run_id: str, log: Path) -> dict:
        """One run's cost, both ways: its billed time (from when it ran to when it ended, the
        platform's timestamps) at the hourly rate its dispatch quoted (on-demand runs are billed
        per GPU-hour from pods ready, prorated to the second: commands/rl.py:1452-1456@0.18.0),
        and what `prime train usage` shows (a token view: commands/usage.py:31-38@0.18.0)."""
        seen = rec.setdefault("runs", {}).setdefault(run_id, {})
        try:   # the end as the platform reports it (the last poll may predate it)
            run = self.cli.json("train", "get", run_id, "-o", "json", timeout=120)["run"]
            seen.update({k: run.get(k) for k in ("created_at", "started_at", "completed_at", "updated_at",
                                                 "gpu_count") if run.get(k)})
        except (CLIError, ValueError, KeyError, TypeError):
            pass
        usage: float | None
        try:
            usage = float(self.cli.json("train", "usage", run_id, "-o", "json",
                                        timeout=120).get("total_cost_usd") or 0.0)
        except (CLIError, ValueError, AttributeError):
            usage = None
            say(log, f"`prime train usage {run_id}` failed: its usage view is not counted")
        return run_bill(seen, usage, settled_at=now())


def platform_time(value: Any) -> float | None:
    """A platform timestamp (ISO 8601, as RLRun serializes datetimes) as epoch seconds; a number
    is one of the driver's own (time.time())."""
    from datetime import datetime, timezone

    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def run_bill(seen: dict, usage: float | None, settled_at: float | None = None) -> dict:
    """A run's billed seconds, its GPU-hours and their cost at the dispatch's rate: more than the
    platform bills, never less. From the earliest start known (created_at: `started_at` may be
    the first step rather than pods ready; the driver's dispatch) to the latest end known
    (completed_at; updated_at, which `train get` always prints, where a run the platform failed,
    stopped or paused has none; the driver's stop), else to when the driver settled it."""
    starts = [t for t in (platform_time(seen.get(k)) for k in ("created_at", "started_at", "dispatched_at"))
              if t is not None]
    ends = [t for t in (platform_time(seen.get(k)) for k in ("completed_at", "updated_at", "stopped_at"))
            if t is not None]
    start = min(starts) if starts else None
    end = max(ends) if ends else settled_at
    seconds = max(0.0, end - start) if start is not None and end is not None else 0.0
    placement = seen.get("placement") or {}
    rate = placement.get("estimatedCostPerHour")
    per_gpu = placement.get("pricePerGpuHour")
    gpus = seen.get("gpu_count") or (round(rate / per_gpu) if rate and per_gpu else None)
    return {"billed_s": round(seconds, 3), "gpu_count": gpus,
            "gpu_hours": round(seconds / 3600 * (gpus or 0), 6),
            "rate_per_hour": rate,
            "gpu_hour_usd": round(float(rate) * seconds / 3600, 6) if rate is not None else None,
            "usage_usd": None if usage is None else round(usage, 6)}


def ledger_entry(rec: dict, views: list[dict], outcome: str) -> dict:
    """A launch's line in the ledger: both views summed over its runs, and cost_usd, the larger
    of the two (what --max-cost gates on: neither undercounts the other's bill)."""
    gpu_usd = [v["gpu_hour_usd"] for v in views if v["gpu_hour_usd"] is not None]
    usage = [v["usage_usd"] for v in views if v["usage_usd"] is not None]
    entry = {"arm": rec["arm"], "kind": rec.get("label", rec["kind"]), "run_ids": list(rec["run_ids"]), "outcome": outcome,
             "billed_s": round(sum(v["billed_s"] for v in views), 3),
             "gpu_hours": round(sum(v["gpu_hours"] for v in views), 6),
             "gpu_hour_usd": round(sum(gpu_usd), 6) if gpu_usd else None,
             "usage_usd": round(sum(usage), 6) if usage else None, "runs": views}
    entry["cost_usd"] = round(max(entry["gpu_hour_usd"] or 0.0, entry["usage_usd"] or 0.0), 6)
    return entry


def run_root(files: list[str], run_id: str) -> str | None:
    """prime-rl's run directory R inside runs/<run_id>/, read from the listing: the directory
    that holds rollouts/, checkpoints/ or broadcasts/step_N/. The CLI says only that outputs go
    under runs/<runId>/ (commands/rl.py:1139-1155@0.18.0); R may be runs/<id>/ itself (as the
    platform's volume docs list checkpoints/step_N/ there) or a directory below it."""
    pat = re.compile(rf"^(runs/{re.escape(run_id)}(?:/[^/]+)*?)/"
                     r"(?:rollouts|checkpoints|broadcasts)/step_\d+/")
    roots = {m.group(1) for f in files if (m := pat.match(f))}
    return min(roots, key=len) if roots else None


def platform_reason(run: dict) -> str:
    """Why the platform says a run ended: its error message and failure analysis."""
    parts = [str(run["error_message"])] if run.get("error_message") else []
    fa = run.get("failure_analysis")
    if isinstance(fa, dict):
        if fa.get("rootCause"):
            parts.append(f"root cause: {fa['rootCause']}")
        ev = [str(e) for e in fa.get("evidence") or []][:3]
        if ev:
            parts.append("evidence: " + "; ".join(ev))
    return ". ".join(parts) or "no reason given (`prime train logs RUN_ID` shows its logs)"


def numbers_only(episode: dict) -> dict:
    """An eval episode cut to what the numeric reader uses (the task key, the env's name, ok,
    and each trace's reward scores, weights and numeric metrics): no prompt, completion,
    answer or info of an eval row is ever kept on this machine."""
    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    traces = []
    for tr in episode.get("traces") or []:
        if not isinstance(tr, dict):
            continue
        traces.append({
            "rewards": {str(k): {"score": float(r["score"]) if num(r.get("score")) else 0.0,
                                 "weight": float(r["weight"]) if num(r.get("weight")) else 1.0}
                        for k, r in (tr.get("rewards") or {}).items() if isinstance(r, dict)},
            "metrics": {str(k): float(v) for k, v in (tr.get("metrics") or {}).items() if num(v)}})
    return {"task": {"key": (episode.get("task") or {}).get("key")},
            "env": {"name": (episode.get("env") or {}).get("name")},
            "ok": bool(episode.get("ok", True)), "traces": traces}
