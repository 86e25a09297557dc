"""The dataset gate on 1,000 rows, side by side with the generator that wrote them.

    python bench/gate_time.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    from driver.gates import dataset
    from driver.gates import decontam
    from generators.stock_arithmetic import FAMILY

    BUCKETS, FEATURE_DEFINITIONS, generate = FAMILY.buckets, FAMILY.feature_definitions, FAMILY.generate
    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    weakness = {
        "prev_eval_acc": 0.2, "reward_by_length_quartile": [0.4, 0.3, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "bench",
                     "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
        "allocations": {f"{d} / {s}": 1000 // len(BUCKETS) + (i < 1000 % len(BUCKETS))
                        for i, (d, s) in enumerate(BUCKETS)},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }
    t0 = time.perf_counter()
    fp = decontam.eval_fingerprints(sys.executable, "stock_arithmetic")
    t_fp = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dataset.jsonl"
        t0 = time.perf_counter()
        rows = generate(weakness, [], out=str(out), seed=1, skeleton_share=0.0)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        rep = dataset.check(out, weakness, eval_fingerprints=fp)
        t_gate = time.perf_counter() - t0
    print(f"rows: {len(rows)}")
    print(f"eval fingerprints (once per run, a subprocess): {t_fp:.2f}s")
    print(f"generator (peer):  {t_gen:.3f}s")
    print(f"gate, every line:  {t_gate:.3f}s  ({len(rows) / t_gate:,.0f} rows/s)")
    print(f"ratio gate/generator: {t_gate / t_gen:.2f}")
    print("lines failing (skeleton share is 0 here by design):",
          [n for n, ok, _ in rep.lines if not ok])


if __name__ == "__main__":
    main()
