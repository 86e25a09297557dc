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
from rl_contract.current import RUN_NAME, CurrentLayout, sealed_episode

SECRETS = ("WANDB_API_KEY", "HF_TOKEN")  # the only secrets a dedicated run accepts
TRANSIENT_FAILURES = 20                 # consecutive failed status reads before the run counts as lost
TRAIN_RESUME_SINCE = "0.16.0"           # the first CLI with `prime train resume` (0.15.0 has none)
TERMINAL = {"STOPPED", "FAILED", "COMPLETED", "PAUSED"}   # commands/rl.py:117@0.18.0
_LAYOUT = CurrentLayout()


def lost_after() -> int:
    """Consecutive failed `prime train get` reads after which a run counts as lost (then it is
    stopped by id and its cost recorded before anything else is launched)."""
    return int(os.environ.get("DRIVER_HOSTED_LOST_AFTER", str(TRANSIENT_FAILURES)))


def sync_wait_s() -> float:
    """How long a completed run's outputs may trail its end on the volume before the driver
    stops and leaves it to `driver resume` (re-listed with backoff meanwhile)."""
    return float(os.environ.get("DRIVER_HOSTED_SYNC_WAIT_S", "900"))


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
                # volume, never from the checkpoint the arm started from. What it ran is billed
                # first: a continuation that fails to start (a control's, which the controls
                # phase records and moves past) leaves it in the ledger all the same
                self._record_bill(rec, out, log, "paused")
                self._continue(rec, out, log, run_id)
                running_since, last_step, queued_since = None, None, clock.monotonic()
                continue
            t = clock.monotonic()
            if status in ("QUEUED", "PENDING") and t - queued_since >= limits.queue_s:
                # the queue has its own limit (--queue-timeout): unbilled, but a run that never
                # starts holds the loop; stopped like a stalled run, and resubmitted on resume
                say(log, f"run {run_id}: still {status} after {t - queued_since:.0f}s (--queue-timeout)")
                return PollResult("stalled", None, 0, f"hosted run {run_id}: still queued after "
                                  f"{limits.queue_s:.0f}s (--queue-timeout)")
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
        gone through (commands/rl.py:1798-1806@0.18.0). A stop the platform did not confirm (the
        CLI's "did not reach a terminal state ... still being torn down", exit 0 and no status:
        :1788-1796) raises StillRunning, which ends the driver: nothing else is launched while
        the run may still run and bill, and its record stays open for `driver resume`."""
        out = Path(tp.output_dir)
        rec = read_record(out)
        run_id = tp.run_id or (rec or {}).get("run_ids", [None])[-1]
        if run_id is None:
            return
        r = self.cli.run("train", "stop", run_id, "-f", timeout=300)
        m = re.search(r"^Status: (\S+)", r.stdout, re.M)
        status = m.group(1).upper() if m else None
        if r.returncode != 0 or status not in TERMINAL:
            said = error_text(r) if r.returncode else (
                f"status {status}" if status else "no status: " + " ".join(r.stdout.split())[-300:])
            if rec is not None:
                say(self._log_of(rec, out), f"run {run_id}: `prime train stop` did not confirm the stop ({said})")
            raise StillRunning(
                f"`prime train stop {run_id} -f` did not confirm the run stopped "
                f"({said}): it may still run and "
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
        dispatch had answered (its placement unknown, at the highest listed on-demand rate: never
        billed less than the platform would); None where the platform
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
        rec.setdefault("runs", {})[found] = {"dispatched_at": now(), "placement": self._listed_rate()}
        rec["status"] = None
        write_record(out, rec)
        say(log, f"`prime train` failed ({why}), but the platform made run {found} as {rec['name']}: "
                 "tracking it (one run, billed once)")
        return found

    def _listed_rate(self) -> dict:
        """The placement an adopted run is billed at, its dispatch answer lost: the highest
        on-demand $/GPU-hour `prime train models` lists (times the gpu_count `train get`
        reports), so the ledger never bills less than the platform would; {} where none is listed."""
        try:
            models = self.cli.json("train", "models", "-o", "json", timeout=120)
        except (CLIError, ValueError, AttributeError):
            return {}
        prices = [float(o["price_per_gpu_hour"]) for o in models.get("on_demand") or []
                  if isinstance(o, dict) and isinstance(o.get("price_per_gpu_hour"), (int, float))]
        return {"pricePerGpuHour": max(prices), "rate_source": "listed"} if prices else {}

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
        it paused and no step is trained, or billed, twice. A continuation submitted before the
        driver died is adopted, never submitted again; a pause that left no checkpoint is not
        continued at all (_pause_lost)."""
        from packaging.version import Version

        found = self._continuation(rec, paused)
        if found:
            return self._adopt_continuation(rec, out, log, paused, found, "submitted before a restart")
        root, step = self._paused_checkpoint(rec, out, log, paused)
        if Version(self.cli_version) >= Version(TRAIN_RESUME_SINCE):
            args = ["train", "resume", paused, "--yes", "--output", "json"]
            for key in SECRETS:
                if os.environ.get(key):
                    args += ["-e", key]
            # recorded before the request: the platform names the new run as it likes, so a
            # driver killed after it finds the continuation by what it is, not by its name
            if paused not in rec.setdefault("resumes_sent", []):
                rec["resumes_sent"].append(paused)
                write_record(out, rec)
            r = self.cli.run(*args)
            faults.point("hosted:after-submit")
            if r.returncode != 0:
                return self._resume_failed(rec, out, log, paused, error_text(r))
            return self._dispatched(rec, out, log, r, paused)
        cfg = tomllib.loads(Path(rec["config"]).read_text())
        cfg["resume"] = {"dir": f"{VOLUME_MOUNT}/{root}/checkpoints/step_{step}"}
        path = Path(rec["config"]).with_name(Path(rec["config"]).stem + f"_resume_{paused}.toml")
        atomic_write_text(path, f"# {rec['arm']}: continues paused run {paused} from its last "
                                f"checkpoint (step {step})\n" + tomli_w.dumps(cfg))
        return self._submit(rec, out, log, resume_from=paused, config=str(path))

    def _continuation(self, rec: dict, paused: str) -> str | None:
        """A run continuing `paused` that the platform has made but this record does not hold:
        one named as the launch (a --resume-from submission carries the config's name), else,
        once a `train resume` of it was sent, the run that is its continuation whatever its name.
        The CLI sends no name on resume (commands/rl.py:1882-1891@0.18.0; the name "lives on the
        platform's RFTRun row, not the TOML", api/training.py:659@0.18.0), so that run is the
        one `train list` shows with the paused run's config (the fields it prints per run:
        base_model, environments, max_steps, batch_size, commands/rl.py:74-76@0.18.0) made after
        the paused run. Two such runs: StillRunning, for either may be billing."""
        data = self.cli.json("train", "list", "-n", "100", "-o", "json", timeout=120)
        runs = [r for r in data.get("runs") or [] if isinstance(r, dict)]
        fresh = [r for r in runs if str(r.get("id")) not in rec["run_ids"]]
        named = [str(r["id"]) for r in fresh if r.get("name") == rec["name"]]
        if named or paused not in rec.get("resumes_sent", []):
            return named[0] if named else None
        source = next((r for r in runs if str(r.get("id")) == paused), None) \
            or self.cli.json("train", "get", paused, "-o", "json", timeout=120)["run"]
        alike = [str(r["id"]) for r in fresh if self._continues(r, source)]
        if len(alike) > 1:
            raise StillRunning(
                f"[{rec['arm']}] runs {', '.join(alike)} each look like the continuation of paused run "
                f"{paused} (its config, made after it), and the platform names a continuation as it "
                "likes: more than one may be billing. Stop the ones that are not this arm's (`prime "
                "train stop RUN`), then `driver resume`; nothing else is submitted until then.")
        return alike[0] if alike else None

    @staticmethod
    def _continues(run: dict, paused: dict) -> bool:
        """`run` (as `train list` prints it) carries the paused run's config and was made after
        it: what a continuation of it is ("reuses the paused run's config", commands/rl.py:1872
        @0.18.0)."""
        keys = ("base_model", "environments", "max_steps", "batch_size")
        born, since = platform_time(run.get("created_at")), platform_time(paused.get("created_at"))
        return bool(paused.get("base_model")) and all(run.get(k) == paused.get(k) for k in keys) \
            and born is not None and since is not None and born > since

    def _adopt_continuation(self, rec: dict, out: Path, log: Path, paused: str, run_id: str, how: str) -> str:
        """Record a continuation of `paused` the platform made, as if its dispatch had answered."""
        rec["run_ids"].append(run_id)
        rec["resumed_from"].append(paused)
        runs = rec.setdefault("runs", {})   # its rate: the paused run's (same config and GPU type)
        runs.setdefault(run_id, {"dispatched_at": now(),
                                 "placement": (runs.get(paused) or {}).get("placement") or {}})
        rec["status"] = None
        write_record(out, rec)
        say(log, f"found run {run_id}, continuing paused run {paused}, {how}")
        return run_id

    def _resume_failed(self, rec: dict, out: Path, log: Path, paused: str, why: str) -> str:
        """`train resume` exited non-zero. Like a create, a resume can time out, or meet a 5xx,
        after the platform made the run (api/training.py:306-313@0.18.0 shares the create's
        timeout): it is looked up before the failure is believed."""
        say(log, f"`prime train resume {paused}` failed: {why}")
        try:
            found = self._continuation(rec, paused)
        except (CLIError, ValueError, KeyError, TypeError) as e:
            raise StillRunning(
                f"[{rec['arm']}] `prime train resume {paused}` failed ({why}), and whether the platform made "
                f"its continuation is unknown: `prime train list` failed ({e}). `driver resume` looks it "
                "up again before submitting anything.") from None
        if found:
            return self._adopt_continuation(rec, out, log, paused, found, f"made though `prime train resume` failed ({why})")
        raise DriverError(f"[{rec['arm']}] `prime train resume {paused}` failed: {why}; `driver resume` "
                          "tries again")

    def _paused_checkpoint(self, rec: dict, out: Path, log: Path, paused: str) -> tuple[str, int]:
        """The paused run's last checkpoint on the volume: its root and step. A run's files show
        once it has ended and may trail that (commands/volumes.py:1297@0.18.0), so the volume is
        listed again with backoff, up to DRIVER_HOSTED_SYNC_WAIT_S, before the pause counts as
        having left none (_pause_lost)."""
        waited, pause, limit = 0.0, max(1.0, poll_floor_s()), sync_wait_s()
        while True:
            try:
                files, why = self._listing(rec["volume"], paused), None
            except (CLIError, ValueError, AttributeError) as e:
                files, why = [], str(e)
            root = run_root(files, paused)
            steps = sorted(int(m.group(1)) for f in files if root and (m := re.match(
                re.escape(root) + r"/checkpoints/step_(\d+)/", f)))
            if root and steps:
                return root, steps[-1]
            if waited >= limit:
                self._pause_lost(rec, out, log, paused, f"the listing failed ({why})" if why else self._holds(files))
            step = min(pause, limit - waited)
            clock.sleep(step)
            waited, pause = waited + step, min(pause * 2, 120.0)

    def _pause_lost(self, rec: dict, out: Path, log: Path, paused: str, held: str) -> None:
        """A pause that left no checkpoint (the platform's call; the CLI says only that a run is
        paused "at a checkpoint", commands/rl.py:1818@0.18.0). `train resume` would run the
        paused run's stored config ("from its stored config", api/training.py:306-309@0.18.0),
        i.e. from the arm's start, dispatched and read back as if it continued: the steps before
        the pause trained and billed twice, unsaid. Instead the launch ends failed, its cost (the
        lost steps) in the ledger and said, and `driver resume` trains the arm again from its
        start, as after any failed run."""
        reached = self._latest_step(paused)
        detail = (f"paused run {paused} left no checkpoint on volume {rec['volume']} ({held}), so it cannot "
                  f"be continued: the steps it trained{f' (to step {reached})' if reached else ''} are "
                  "lost, and billed (their cost is in the ledger)")
        say(log, detail)
        self._settle(rec, out, log, 1, detail)
        raise DriverError(f"[{rec['arm']}] {detail}. `prime train resume` would run its stored config again "
                          "from the arm's start as if it continued, so it is not resumed: `driver resume` "
                          "trains the arm again from its start.")

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

    def _roots(self, rec: dict) -> tuple[dict[str, tuple[dict[str, str], list[str]]], list[str], str | None]:
        """Each run of the launch: where its prime-rl trees are on the volume, by kind (rollouts,
        checkpoints, broadcasts: where inside runs/<runId>/ the platform puts each, the CLI does
        not say), and its files; the last run's listing; and why a listing failed (an empty
        prefix exits 1 while the volume trails the run's end), or None."""
        out, files, why = {}, [], None
        for run_id in rec["run_ids"]:
            try:
                files = self._listing(rec["volume"], run_id)
            except (CLIError, ValueError, AttributeError) as e:
                files, why = [], str(e)
                continue
            roots = run_roots(files, run_id)
            if roots:
                out[run_id] = (roots, files)
        return out, files, why

    def _missing(self, rec: dict, tp: TrainerProcess, roots: dict) -> list[str]:
        """What the launch must leave on the volume that its listings do not hold yet: a training
        run's final checkpoint trees (every later arm forks them), an eval run's eval traces."""
        if rec["kind"] != "train":
            return [] if _eval_traces(roots) else ["rollouts/step_N/eval/all/traces.jsonl"]
        want = [t.relative_to(Path(tp.output_dir) / RUN_NAME).as_posix()
                for t in _LAYOUT.checkpoint_trees(Path(tp.output_dir), tp.final_step or 0)]
        return [rel for rel in want if not any(_tree(r, files, rel) for r, files in roots.values())]

    def _await_outputs(self, rec: dict, tp: TrainerProcess, log: Path) -> dict:
        """The launch's trees once the volume holds what it must: the CLI promises a run's files
        only "once it ends" (commands/volumes.py:1297@0.18.0), so a listing taken at the first
        COMPLETED poll may be empty (exit 1) or partial. Re-listed with backoff, up to
        DRIVER_HOSTED_SYNC_WAIT_S; past that the run stays unsettled (billed, never retrained)
        and the driver stops: `driver resume` lists it again."""
        waited, pause, limit = 0.0, max(1.0, poll_floor_s()), sync_wait_s()
        while True:
            roots, listed, why = self._roots(rec)
            missing = self._missing(rec, tp, roots)
            if not missing:
                if waited:
                    say(log, f"the volume holds the run's outputs {waited:.0f}s after it ended")
                return roots
            if waited >= limit:
                run_id = rec["run_ids"][-1]
                held = f"the listing failed ({why})" if why and not listed else f"it holds {self._holds(listed)}"
                say(log, f"run {run_id} completed, but {waited:.0f}s later volume {rec['volume']} still "
                         f"lacks {', '.join(missing)}; {held}")
                raise StillRunning(
                    f"[{rec['arm']}] hosted run {run_id} completed and is billed, but after {waited:.0f}s of "
                    f"re-listing volume {rec['volume']} still lacks {', '.join(missing)} under runs/{run_id}/ "
                    f"({held}). Nothing is retrained: `driver resume` lists it again (check it with "
                    f"`prime volumes ls {rec['volume']} runs/{run_id}/ -R`; DRIVER_HOSTED_SYNC_WAIT_S sets "
                    "the wait).")
            step = min(pause, limit - waited)
            say(log, f"the volume does not hold {', '.join(missing)} yet; listing again in {step:.0f}s")
            clock.sleep(step)
            waited += step
            pause = min(pause * 2, 120.0)

    @staticmethod
    def _holds(files: list[str]) -> str:
        """What a run's listing holds, in a line: nothing, or its first paths."""
        if not files:
            return "nothing"
        shown = ", ".join(files[:8])
        return f"{len(files)} files: {shown}" + (", ..." if len(files) > 8 else "")

    def _completed(self, rec: dict, out: Path, log: Path, tp: TrainerProcess, eval_file: Path,
                   expected_rows: int) -> PollResult:
        # the run has ended: its bill goes into the ledger before anything is read back, so a
        # download that fails, a volume that trails, or a driver killed meanwhile never leaves a
        # billed run out of cost.json (the settle below records that entry, not billed again)
        billed = self._record_bill(rec, out, log, "completed")
        roots = self._await_outputs(rec, tp, log)
        last = max(roots, key=rec["run_ids"].index)
        rec["roots"] = roots[last][0]
        rec["root"] = rec["roots"].get("checkpoints") or min(rec["roots"].values(), key=len)
        write_record(out, rec)
        faults.point("hosted:before-download")
        if rec["kind"] == "train":
            self._download_train(rec, out, tp, roots, log)
            return self._settle(rec, out, log, 0, "", billed=billed)
        rows = self._download_eval(rec, eval_file, roots)
        if rows < expected_rows:
            return self._settle(rec, out, log, 1, f"the eval run wrote {rows}/{expected_rows} eval rows",
                                billed=billed)
        return self._settle(rec, out, log, 0, "", rows, billed=billed)

    def _download_train(self, rec: dict, out: Path, tp: TrainerProcess,
                        roots: dict[str, tuple[dict[str, str], list[str]]], log: Path) -> None:
        """The train rollouts of every new step (the teacher's evidence, the train reward) and,
        for the final step's checkpoint trees, where they are on the volume. Each is looked up
        under whichever root of the run's tree holds its kind, a later run of the chain first."""
        final = tp.final_step or 0
        order = sorted(roots, key=rec["run_ids"].index, reverse=True)   # a later run of the chain wins
        absent = []
        for step in _LAYOUT.launch_train_steps(tp.start_step, final):   # rl_contract's window
            rel = _LAYOUT.train_file(Path(), step).relative_to(_LAYOUT.run_dir(Path())).as_posix()
            src = next((f for r in order if (f := _file(*roots[r], rel))), None)
            local = _LAYOUT.train_file(out, step)
            if src and not local.exists():
                self._get(rec["volume"], src, local)
            elif not src and not local.exists():
                absent.append(step)
        for tree in _LAYOUT.checkpoint_trees(out, final):
            rel = tree.relative_to(Path(out) / RUN_NAME).as_posix()
            for r in order:
                found = _tree(*roots[r], rel)
                if found:
                    path, inside = found
                    tree.mkdir(parents=True, exist_ok=True)
                    atomic_write_json(tree / REMOTE, {"volume": rec["volume"], "path": path,
                                                      "run_id": r, "files": inside,
                                                      "get": f"prime volumes get {rec['volume']} {path}"})
                    break
        say(log, f"read back {final - tp.start_step - len(absent)} steps of train rollouts" +
            (f" (steps {', '.join(map(str, absent))} left none on the volume)" if absent else "") +
            f"; the final checkpoint stays on volume {rec['volume']} under {rec['root']}")

    def _download_eval(self, rec: dict, eval_file: Path,
                       roots: dict[str, tuple[dict[str, str], list[str]]]) -> int:
        """The startup eval of the eval run, cut to its numbers as it is read."""
        found = _eval_traces(roots)
        if not found:
            return 0
        tmp = eval_file.with_name(eval_file.name + ".remote")
        self._get(rec["volume"], found[0][1], tmp)
        try:
            lines = [json.dumps(sealed_episode(json.loads(line))) + "\n"
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

    def _settle(self, rec: dict, out: Path, log: Path, rc: int, detail: str, rows: int = 0,
                billed: dict | None = None) -> PollResult:
        """The launch has ended: its cost into the ledger (`billed`: the entry its end already
        recorded, so the platform is not asked twice), its exit status beside its log."""
        outcome = "completed" if rc == 0 else "failed"
        if billed is None:
            entry = self._record_bill(rec, out, log, outcome)
        else:
            entry = {**billed, "outcome": outcome}
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

    def _record_bill(self, rec: dict, out: Path, log: Path, outcome: str) -> dict:
        """Every run of the launch billed into the ledger under the launch's name (written again,
        not added, each time: a launch has one entry)."""
        views = [self._bill(rec, run_id, log) for run_id in rec["run_ids"]]
        entry = ledger_entry(rec, views, outcome)
        record_cost(run_dir_of(out), rec["name"], entry)
        return entry

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
    if rate is None and per_gpu and gpus:   # an adopted run: the listed price, per GPU it held
        rate = float(per_gpu) * int(gpus)
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


_KINDS = ("rollouts", "checkpoints", "broadcasts")


def run_roots(files: list[str], run_id: str) -> dict[str, str]:
    """Where each of prime-rl's trees is inside runs/<run_id>/, read from the listing: for each
    kind (rollouts/, checkpoints/, broadcasts/), the shortest directory holding `<kind>/step_N/`.
    The CLI says only that outputs go under runs/<runId>/ (commands/rl.py:1139-1155@0.18.0): R
    may be runs/<id>/ itself (the platform's volume docs list checkpoints/step_N/ there), a
    directory below it, or split (checkpoints written to a `ckpt` output dir of their own)."""
    pat = re.compile(rf"^(runs/{re.escape(run_id)}(?:/[^/]+)*?)/({'|'.join(_KINDS)})/step_\d+/")
    found: dict[str, str] = {}
    for f in files:
        if (m := pat.match(f)) and (m.group(2) not in found or len(m.group(1)) < len(found[m.group(2)])):
            found[m.group(2)] = m.group(1)
    return found


def run_root(files: list[str], run_id: str) -> str | None:
    """The run's checkpoint root (where a paused run's checkpoints/step_N/ are), else its
    shortest root."""
    roots = run_roots(files, run_id)
    return roots.get("checkpoints") or (min(roots.values(), key=len) if roots else None)


def _file(roots: dict[str, str], files: list[str], rel: str) -> str | None:
    """The listed path of `rel` (a path inside prime-rl's run dir) under the root of its kind."""
    root = roots.get(rel.split("/", 1)[0])
    return f"{root}/{rel}" if root and f"{root}/{rel}" in files else None


def _tree(roots: dict[str, str], files: list[str], rel: str) -> tuple[str, int] | None:
    """The listed path of the tree `rel` under the root of its kind, and how many files it holds."""
    root = roots.get(rel.split("/", 1)[0])
    inside = sum(1 for f in files if root and f.startswith(f"{root}/{rel}/"))
    return (f"{root}/{rel}", inside) if inside else None


def _eval_traces(roots: dict) -> list[tuple[int, str]]:
    """The eval traces the launch's runs left (rollouts/step_N/eval/all/traces.jsonl), by step."""
    return sorted((int(m.group(1)), f) for r, (kinds, files) in roots.items() if "rollouts" in kinds
                  for f in files if (m := re.fullmatch(
                      re.escape(kinds["rollouts"]) + r"/rollouts/step_(\d+)/eval/all/traces\.jsonl", f)))


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
