#!/usr/bin/env bash
# Issue 24 on a machine with ONE GPU: a rank dies and `gputui check --json` must quote why,
# within 15 s of the death. A real 2-rank NCCL job on GPU 0 (scripts/device/lastwords_worker.py,
# NCCL_HOSTID per rank), each rank's stderr in a file; gputui check starts once both ranks
# are READY, and rank 1 dies 3 s later:
#   xid  a Triton kernel's illegal address (Xid 31): "CUDA error: an illegal memory access"
#   ddp  DDP's unused parameter: "RuntimeError: Expected to have finished reduction ..."
# Rank 0 spins in all_reduce for a peer that is gone. Also the dashboard's frame at 80x24.
#   LIMIT=230 bash scripts/device/run_all.sh lw check_lastwords
# PASS/FAIL lines in $OUT/lastwords_summary.txt. About 3 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/lastwords_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PIDS=() BG=()
stop_all() {
  for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do stop_group "$p"; done
  PIDS=() BG=()
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT
say "INFO $(nvidia-smi -L | head -1)"

for mode in $(echo "${MODES:-xid,ddp}" | tr , ' '); do
  go="/tmp/gputui_lw_go_$mode"
  rm -f "$go"
  port=$((29600 + RANDOM % 300))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      NCCL_HOSTID="lw-node$r" setsid python3 scripts/device/lastwords_worker.py "$mode" "$go" \
      >"$O/lw_${mode}_rank$r.out" 2>"$O/lw_${mode}_rank$r.err" &
    PIDS+=($!)
  done
  for _ in $(seq 1 180); do  # at most 90 s for both ranks
    [ "$(cat "$O"/lw_"${mode}"_rank*.out 2>/dev/null | grep -c '^READY')" -ge 2 ] && break
    sleep 0.5
  done
  if [ "$(cat "$O"/lw_"${mode}"_rank*.out | grep -c '^READY')" -lt 2 ]; then
    say "FAIL $mode: the job did not start"
    tail -15 "$O"/lw_"${mode}"_rank*.err | tee -a "$S"
    stop_all
    continue
  fi
  (timeout 80 python3 -m gputui check --json --duration 40 --interval 0.5 \
    2>"$O/lw_$mode.check.err"; echo "{\"_exit\": $?}") | stamp >"$O/lw_$mode.jsonl" &
  CHK=$!
  timeout 60 python3 scripts/device/app_frame.py "$O/lw_${mode}_app.svg" 30 80x24 \
    >"$O/lw_${mode}_app.txt" 2>&1 &
  BG+=($!)
  sleep 3  # both gputui have sampled the ranks alive (where they write is remembered)
  pid1=$(grep -m1 -o 'READY rank=1 pid=[0-9]*' "$O/lw_${mode}_rank1.out" | cut -d= -f3)
  touch "$go"
  rm -f "$O/lw_${mode}_exit"
  (for _ in $(seq 1 600); do  # the time rank 1's process is gone (the death, for the 15 s)
    kill -0 "$pid1" 2>/dev/null || { date +%s.%N >"$O/lw_${mode}_exit"; break; }
    sleep 0.1
  done) &
  BG+=($!)
  wait "$CHK"
  for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
  BG=()
  python3 - "$O/lw_$mode.jsonl" "$O/lw_${mode}_rank1.out" "$mode" "$O/lw_${mode}_exit" <<'PY' | tee -a "$S"
import json, os, re, sys
path, out, mode, exitf = sys.argv[1:5]
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
m = re.search(r"^DIE rank=1 t=([\d.]+)", open(out).read(), re.M)
died = float(open(exitf).read()) if os.path.exists(exitf) else None
print(f"  rank 1 said DIE at {m.group(1) if m else '?'}; its process was gone at {died}")
want = {"xid": "CUDA error: an illegal memory access", "ddp": "Expected to have finished reduction"}[mode]
hit = None
for d in lines:
    rel = f"{d['_arrived'] - died:+6.1f}s" if died else "?"
    print(f"  {rel} {d['state']:8s} {d['reason'][:150]}")
    for f in (d.get("findings") or [])[:4]:
        print(f"      finding: {f[:240]}")
    for e in (d.get("lastwords") or {}).get("ranks") or []:
        print(f"      last_words rank {e.get('rank')} gone={e.get('gone')}: {str(e.get('cause'))[:200]}")
    if hit is None and any(want in f and "died" in f for f in d.get("findings") or []):
        hit = d
alive = any(want in f and "still alive" in f for d in lines for f in d.get("findings") or [])
took = hit["_arrived"] - died if hit and died else None
ok = took is not None and took <= 15.0
how = f"quoted {took:.1f} s after the death" if took is not None else "never quoted as died"
if alive:
    how += "; quoted while rank 1 was still alive (it wrote the error before exiting)"
print(f"{'PASS' if ok else 'FAIL'} {mode}: check exit {rc}; the cause ({want!r}) {how}")
PY
  head -3 "$O/lw_$mode.check.err" | tee -a "$S"
  grep -m3 -E "^(banner|findings):" "$O/lw_${mode}_app.txt" | cut -c1-300 | tee -a "$S"
  grep -m2 -E "Error|error" "$O/lw_${mode}_rank1.err" | cut -c1-200 | tee -a "$S"
  (dmesg 2>/dev/null | grep -E "NVRM: Xid" | tail -2) | tee -a "$S"
  stop_all
done
