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
#   5. (current) whether the pinned vllm-router forwards admin calls: a server started as `rl`
#      starts it (`inference @ R/configs/inference.json`), /pause, /resume, /metrics posted to the
#      router port and to the engine port, each status code
#   6. (current) whether a LoRA run's adapter broadcast loads into the eval server: a 1-step run
#      with [trainer.model.lora], its broadcast posted to /load_lora_adapter of a server started
#      from that run's inference.json, and of one started without LoRA
# It ends with one line per open fact of docs/backends.md and its answer ("FACT: ...").
# Paste report.txt into an issue: each section says which docs/backends.md fact it settles.
set -uo pipefail

CHECKOUT=$(cd "${1:?usage: bench/gpu_facts.sh CHECKOUT [OUT]}" && pwd)
cd "$CHECKOUT"
VERSION=$(git describe --tags --abbrev=0 2>/dev/null || echo unknown)
OUT=$(mkdir -p "${2:-$OLDPWD/gpu-facts-$VERSION}" && cd "${2:-$OLDPWD/gpu-facts-$VERSION}" && pwd)
REPORT="$OUT/report.txt"
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
FACTS=()
fact() { FACTS+=("FACT: $*"); }
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
tail -3 "$OUT/wandb.log" >/dev/null
fact "wandb.init without a key in a detached process: $(grep -qi 'api key\|wandb.errors' "$OUT/wandb.log" && echo fails || echo 'does not fail')"
if [ "$CURRENT" = 1 ]; then
  fact "episodes spilled into step_3 of the 2-step run: $(ls "$R"/run/rollouts/step_3/train/all/traces.jsonl >/dev/null 2>&1 && wc -l < "$R"/run/rollouts/step_3/train/all/traces.jsonl || echo 0)"
  fact "partial groups (fewer episodes than the group size) in the 2-step run's all files: $(python3 - "$R" <<'PY'
import collections, json, pathlib, sys
partial = 0
for f in sorted(pathlib.Path(sys.argv[1]).glob("run/rollouts/step_*/train/all/traces.jsonl")):
    ids = collections.Counter((json.loads(l).get("group") or {}).get("id") for l in f.read_text().splitlines() if l.strip())
    size = max(ids.values(), default=0)
    partial += sum(1 for n in ids.values() if n < size)
print(partial)
PY
)"
  serve() {   # CONFIG_FILE LOG: start `inference @ FILE` as rl does, wait for its health
    uv run inference @ "$1" > "$2" 2>&1 &
    SERVER=$!
    local port; port=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['server']['port'])" "$1")
    for _ in $(seq 1 120); do curl -sf "localhost:$port/health" >/dev/null && return 0; kill -0 $SERVER 2>/dev/null || return 1; sleep 5; done
    return 1
  }
  stop_server() { kill -- -$SERVER $SERVER 2>/dev/null; pkill -f 'vllm|vllm-router' 2>/dev/null; wait $SERVER 2>/dev/null; sleep 5; }
  post() { curl -s -o /dev/null -w '%{http_code}' -X POST "$@"; }

  say ""; say "== 5. does the pinned router forward admin calls? (docs/backends.md: the final-weights eval's admin calls) =="
  INF="$R/run/configs/inference.json"
  PORT=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c['server']['port'])" "$INF")
  BACK=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('backend_port') or c['server']['port'] + 100)" "$INF")
  if serve "$INF" "$OUT/router.log"; then
    for path in pause resume metrics; do
      method=POST; [ "$path" = metrics ] && method=GET
      rc_router=$(curl -s -o /dev/null -w '%{http_code}' -X $method "localhost:$PORT/$path")
      rc_engine=$(curl -s -o /dev/null -w '%{http_code}' -X $method "localhost:$BACK/$path")
      say "    /$path: router ($PORT) $rc_router, engine ($BACK) $rc_engine"
      fact "the pinned router forwards /$path: $([ "$rc_router" = 200 ] && echo yes || echo "no ($rc_router)")"
    done
  else
    say "the server did not start; last lines:"; tail -5 "$OUT/router.log" | sed 's/^/    /' >> "$REPORT"
  fi
  stop_server

  say ""; say "== 6. does a LoRA adapter broadcast load into the eval server? (the arm's inference.json) =="
  L="$OUT/lora"
  run_rl "$L" 1 --trainer.model.lora.rank 8 --trainer.model.lora.alpha 16 > "$OUT/lora.log" 2>&1
  say "1-step LoRA run exit status: $?"
  LB=$(ls -d "$L"/run/broadcasts/step_* 2>/dev/null | sort -V | tail -1)
  say "adapter broadcast: $LB"; ls "$LB" 2>/dev/null | sed 's/^/    /' >> "$REPORT"
  LINF="$L/run/configs/inference.json"
  say "its inference.json sets: $(python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['vllm']; print({k: v.get(k) for k in ('enable_lora', 'max_lora_rank')})" "$LINF" 2>&1)"
  LBACK=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('backend_port') or c['server']['port'] + 100)" "$LINF")
  if serve "$LINF" "$OUT/lora_server.log"; then
    rc=$(post "localhost:$LBACK/load_lora_adapter" -H 'Content-Type: application/json' -d "{\"lora_name\": \"eval-adapter\", \"lora_path\": \"$LB\"}")
    say "    load into the server of its inference.json: $rc"
    fact "an adapter broadcast loads into a server started from the arm's inference.json: $([ "$rc" = 200 ] && echo yes || echo "no ($rc)")"
  fi
  stop_server
  MODEL=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vllm']['model'])" "$LINF")
  uv run inference --vllm.model "$MODEL" --server.port 8000 > "$OUT/plain_server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 120); do curl -sf localhost:8000/health >/dev/null && break; sleep 5; done
  rc=$(post "localhost:8100/load_lora_adapter" -H 'Content-Type: application/json' -d "{\"lora_name\": \"eval-adapter\", \"lora_path\": \"$LB\"}")
  say "    load into a server started without LoRA: $rc"
  fact "an adapter broadcast loads into a server without enable_lora: $([ "$rc" = 200 ] && echo yes || echo "no ($rc)")"
  stop_server
fi

say ""; say "== open facts, answered =="
for f in "${FACTS[@]}"; do say "$f"; done
say ""; say "report: $REPORT"
