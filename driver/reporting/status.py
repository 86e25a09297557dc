"""Where a run is, from its records: `driver status`'s payload (and its --json output)."""
from __future__ import annotations

from pathlib import Path

from driver import dialects
from driver.arms import progress
from driver.run.rundir import RunDir, now


def status_payload(run_dir: str) -> dict:
    rd = RunDir(run_dir)
    st = rd.load()
    m = rd.load_metrics()
    elapsed = (st.end_ts or now()) - st.start_ts
    train = None
    tp = st.trainer
    if tp is not None and tp.final_step is not None:   # the arm being trained: steps on disk
        out = Path(tp.output_dir)
        train = {"arm": out.parent.name, **progress.training(
            dialects.get(st.dialect), out, tp.start_step, tp.final_step, tp.launched_ts)}
    latest = next((i for i in sorted(m["iters"], key=lambda r: -r["iter"])
                   if i.get("eval_acc") is not None), None)
    return {
        "run_dir": str(rd.path), "status": st.status, "phase": st.phase, "iteration": st.iteration,
        "training": train,
        "latest_eval": None if latest is None else {"arm": f"iter_{latest['iter']}",
                                                     "eval_acc": latest["eval_acc"]},
        "elapsed_s": round(elapsed, 1), "budget_s": st.budget_seconds,
        "max_iters": st.max_iters, "reason": st.reason,
        # every limit the loop's end reached (status names the first): an agent reads whether
        # the run reached the iterations asked for (max_iters_reached) as well as its budget
        "loop_limits": st.limits_reached(),
        "trainer_pid": st.trainer.pid if st.trainer else None,
        "eval_acc": {f"iter_{i['iter']}": i.get("eval_acc") for i in m["iters"]},
        "controls": {c["run"]: c.get("eval_acc") for c in m["controls"]},
        "phase4_errors": st.phase4_errors,
        "compact_warnings": st.compact_warnings,
        "trainer_stand_in": st.trainer_stand_in,
    }
