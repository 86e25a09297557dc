#!/usr/bin/env bash
# Settle, on a GPU node, the prime-rl run-time facts the driver relies on that reading the
# source cannot (docs/backends.md, "Verified from source, and what only a GPU settles").
#
#   bench/gpu_facts.sh CHECKOUT [OUT]      (one prime-rl checkout; run it once per generation)
#
# CHECKOUT is a prime-rl checkout with its venv synced (`uv sync`), on a node with 2 GPUs and
# the model and datasets its reverse-text example uses cached or reachable. It runs prime-rl's
# own reverse-text example config only (no driver, nothing of this project inside prime-rl), in
# about 10-15 minutes, and writes OUT/report.txt (default OUT: ./gpu-facts-<version>):
#   1. a 2-step run and a 1-step resume of it: which rollouts/step_N dirs hold train rows, eval
#      rows and a spilled window; what a broadcast and a weights dir hold (a listing of each)
#   2. whether `uv run inference` can serve a broadcast dir as a model (current generation)
#   3. a stop: a run is SIGTERMed as a process group once its first batch is on disk, SIGKILLed
#      10 s later as the driver's default stop would have; then every python, torchrun and vLLM
#      process left, with its pid, group and session, and nvidia-smi
#   4. W&B turned on with no key, in a process without a terminal
# Paste report.txt into an issue: each section says which docs/backends.md fact it settles.
set -uo pipefail

CHECKOUT=$(cd "${1:?usage: bench/gpu_facts.sh CHECKOUT [OUT]}" && pwd)
cd "$CHECKOUT"
VERSION=$(git describe --tags --abbrev=0 2>/dev/null || echo unknown)
OUT=$(mkdir -p "${2:-$OLDPWD/gpu-facts-$VERSION}" && cd "${2:-$OLDPWD/gpu-facts-$VERSION}" && pwd)
REPORT="$OUT/report.txt"
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
listing() { (cd "$1" 2>/dev/null && find . -maxdepth 6 \( -name '*.jsonl' -o -name '*.safetensors' -o -name '*.json' -o -name STABLE -o -name '*.txt' \) | sort | sed 's/^/    /') >> "$REPORT"; }

CONFIG=""
for c in configs/basic/reverse-text/rl.toml configs/reverse_text/rl.toml configs/reverse-text/rl.toml; do
  [ -f "$c" ] && CONFIG="$c" && break
done
[ -n "$CONFIG" ] || { echo "no reverse-text example config in $CHECKOUT" >&2; exit 2; }
CURRENT=$(grep -q '\[\[orchestrator.train.source\]\]' "$CONFIG" && echo 1 || echo 0)
say "prime-rl $VERSION ($(git rev-parse --short HEAD)), config $CONFIG, generation: $([ "$CURRENT" = 1 ] && echo current || echo classic)"
say "nvidia-smi before:"; nvidia-smi --query-gpu=index,memory.used --format=csv,noheader | sed 's/^/    /' >> "$REPORT"

run_rl() {   # OUTDIR MAXSTEPS [extra flags...]
  local out=$1 steps=$2; shift 2
  if [ "$CURRENT" = 1 ]; then
    uv run rl @ "$CONFIG" --max-steps "$steps" --output-dir "$out" --run.name run \
      --ckpt.interval 1 --weight-broadcast.type filesystem "$@"
  else
    uv run rl @ "$CONFIG" --max-steps "$steps" --output-dir "$out" --ckpt.interval 1 "$@"
  fi
}

say ""; say "== 1. a 2-step run, then a 1-step resume (facts 1, 3, 4, 6, 10, 16) =="
R="$OUT/two_steps"
run_rl "$R" 2 > "$OUT/two_steps.log" 2>&1; say "2-step run exit status: $?"
if [ "$CURRENT" = 1 ]; then
  run_rl "$R" 3 --resume.step 2 > "$OUT/resume.log" 2>&1
else
  run_rl "$R" 3 --ckpt.resume-step 2 > "$OUT/resume.log" 2>&1
fi
say "1-step resume exit status: $?"
say "files (rollouts, weights, broadcasts, control):"; listing "$R"

if [ "$CURRENT" = 1 ]; then
  say ""; say "== 2. can vLLM serve a broadcast dir as a model? (fact 4) =="
  B=$(ls -d "$R"/run/broadcasts/step_* 2>/dev/null | sort -V | tail -1)
  say "broadcast: $B"; ls "$B" | sed 's/^/    /' >> "$REPORT"
  timeout 600 uv run inference --vllm.model "$B" --server.port 8765 > "$OUT/serve_broadcast.log" 2>&1 &
  SERVE=$!
  for _ in $(seq 1 120); do curl -sf localhost:8765/health >/dev/null && break; kill -0 $SERVE 2>/dev/null || break; sleep 5; done
  if curl -sf localhost:8765/health >/dev/null; then say "served: yes"; else say "served: no; last lines:"; tail -5 "$OUT/serve_broadcast.log" | sed 's/^/    /' >> "$REPORT"; fi
  kill -- -$SERVE $SERVE 2>/dev/null; wait $SERVE 2>/dev/null
fi

say ""; say "== 3. a stop: SIGTERM to the group, SIGKILL 10 s later (facts 12, 13, 14) =="
S="$OUT/stopped"
setsid bash -c "$(declare -f run_rl); CONFIG='$CONFIG' CURRENT=$CURRENT run_rl '$S' 50" > "$OUT/stopped.log" 2>&1 &
LEADER=$!
for _ in $(seq 1 360); do
  ls -d "$S"/run_default/rollouts/step_* "$S"/run/rollouts/step_* >/dev/null 2>&1 && break; sleep 5
done
say "process tree at the stop (pid pgid sid cmd):"
ps -eo pid,pgid,sid,args | grep -E 'vllm|torchrun|prime_rl|uv run|VLLM|python' | grep -v grep | sed 's/^/    /' >> "$REPORT"
kill -TERM -- -$LEADER 2>/dev/null; sleep 10; kill -KILL -- -$LEADER 2>/dev/null; sleep 5
say "left 15 s after (pid pgid sid cmd):"
ps -eo pid,pgid,sid,args | grep -E 'vllm|torchrun|prime_rl|VLLM' | grep -v grep | sed 's/^/    /' >> "$REPORT"
say "nvidia-smi after:"; nvidia-smi --query-gpu=index,memory.used --format=csv,noheader | sed 's/^/    /' >> "$REPORT"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/    /' >> "$REPORT"

say ""; say "== 4. W&B on, no key, no terminal (fact 21) =="
W="$OUT/wandb"
if [ "$CURRENT" = 1 ]; then WFLAG=(--monitors.wandb.project gpu-facts); else WFLAG=(--wandb.project gpu-facts); fi
env -u WANDB_API_KEY HOME="$OUT/home" setsid timeout 1200 bash -c "$(declare -f run_rl); CONFIG='$CONFIG' CURRENT=$CURRENT run_rl '$W' 1 ${WFLAG[*]}" < /dev/null > "$OUT/wandb.log" 2>&1
say "exit status: $? (non-zero: wandb.init fails without a key); last lines:"
tail -3 "$OUT/wandb.log" | sed 's/^/    /' >> "$REPORT"
say ""; say "report: $REPORT"
