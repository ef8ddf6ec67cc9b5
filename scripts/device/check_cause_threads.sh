#!/usr/bin/env bash
# Issue 41, items 1-3, on the 4 x H200 node: the cause, not the symptom. One NCCL job per
# case (torchrun, one rank per GPU, scripts/device/cause_threads_worker.py); the last rank is the
# culprit, the others wait in all_reduce + synchronize:
#   gil          its thread `stats` holds the GIL in a regex that never ends
#   poll         it spins in a one-line Python loop polling a flag
#   loader       its DataLoader worker 1 blocks in the dataset's fetch_record()
#   loader-kill  its DataLoader worker 1 is killed with SIGKILL (the rank dies of it) once
#                check watches; its ranks started without torchrun, which would end them all
#   gil@4        gil with a 4 MiB all_reduce (MODE@MIB; the others 256 MiB): on 4 x H200 its
#                waiting ranks once read "busy", not spinning; NVML's readings say why
#   gil@4:Simple the same with NCCL_PROTO=Simple (MODE@MIB:PROTO): if this one spins as the
#                detector knows a spin and gil@4 does not, NCCL's LL/LL128 wait is the cause
# For each, `gputui check --json` (stamped), NVML's readings every 0.5 s (nvidia-smi, with
# each GPU's median over the case in the summary) and one summary line: the first line that
# names the cause, its time after the onset (the culprit's READY: its cause starts then), and
# the exit code. About 3 minutes (6 cases of about 30 s):
#   LIMIT=230 bash scripts/device/run_all.sh cause check_cause_threads
# On the CPU (gloo, 2 ranks, the stand-in libnvidia-ml.so.1 from tests/nvml_standin):
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/out PYTHON=.venv/bin/python bash scripts/device/check_cause_threads.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/cause_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PY="${PYTHON:-python3}"
PIDS=()
stop_all() {  # every group at once: each may take 3 s to end
  [ -n "${SMI:-}" ] && kill "$SMI" 2>/dev/null
  for p in "${PIDS[@]}"; do stop_group "$p" & done
  wait
  PIDS=()
}
# readies LOG: how many ranks said READY (torchrun interleaves its ranks' lines: two READYs
# can share one line, so they are counted by match, not by line)
readies() { grep -o 'READY rank=[0-9]*' "$1" | sort -u | wc -l; }
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT

if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then
  NPROC=2
  gcc -shared -fPIC -O1 -o "$O/libnvidia-ml.so.1" tests/nvml_standin/standin.c -lpthread || exit 1
  export LD_LIBRARY_PATH="$O${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GPUTUI_STANDIN_NVML="spin_gpu:0" PYTHONPATH="$PWD"
  say "INFO dry run: gloo on the CPU, $NPROC ranks, the stand-in NVML (GPU 0 spins)"
else
  NPROC=4
  say "INFO $(nvidia-smi -L | head -1) x $(nvidia-smi -L | wc -l)"
fi

for case in $(echo "${MODES:-gil,poll,loader,loader-kill,gil@4,gil@4:Simple}" | tr , ' '); do
  spec=${case%%:*}  # MODE[@MIB][:PROTO]
  proto=
  [ "$spec" != "$case" ] && proto=${case#*:}
  mode=${spec%@*}
  mib=256
  [ "$spec" != "$mode" ] && mib=${spec#*@}
  [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ] && mib=0.25
  tag=$(echo "$case" | tr '@:' '--')
  if [ -n "$proto" ]; then export NCCL_PROTO=$proto; else unset NCCL_PROTO; fi
  log="$O/cause_$tag.out"
  port=$((29400 + RANDOM % 300))
  go="$O/cause_$tag.go"
  rm -f "$go"
  if [ "$mode" = loader-kill ]; then  # the ranks without a launcher (as srun starts them):
    # torchrun would end every rank the moment one dies, and the job with it
    setsid bash -c 'for r in $(seq 0 $(($4 - 1))); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$4 LOCAL_WORLD_SIZE=$4 MASTER_ADDR=127.0.0.1 \
          MASTER_PORT=$5 "$1" scripts/device/cause_threads_worker.py "$2" --mib "$3" \
          --lifetime 60 --go "$6" &
      done; wait' _ "$PY" "$mode" "$mib" "$NPROC" "$port" "$go" >"$log" 2>&1 &
  else
    setsid "$PY" -m torch.distributed.run --nproc-per-node "$NPROC" --master-port "$port" \
      scripts/device/cause_threads_worker.py "$mode" --mib "$mib" --lifetime 60 >"$log" 2>&1 &
  fi
  PIDS+=($!)
  for _ in $(seq 1 120); do  # at most 60 s for every rank
    [ "$(readies "$log")" -ge "$NPROC" ] && break
    sleep 0.5
  done
  if [ "$(readies "$log")" -lt "$NPROC" ]; then
    say "FAIL $case: the job did not start"
    tail -15 "$log" | tee -a "$S"
    stop_all
    continue
  fi
  if [ "${GPUTUI_DEVICE_DRYRUN:-0}" = 1 ]; then
    GPUTUI_STANDIN_PIDS=$(grep -o 'READY rank=[0-9]* pid=[0-9]*' "$log" | sort -t= -k2 -n |
      sed 's/.*pid=//' | paste -sd,)
    export GPUTUI_STANDIN_PIDS
  elif command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw,power.limit \
      --format=csv,noheader,nounits -lms 500 >"$O/cause_$tag.nvml.csv" 2>&1 &
    SMI=$!
  fi
  (timeout 60 "$PY" -m gputui check --json --duration 18 --interval 0.5 \
    2>"$O/cause_$tag.check.err"; echo "{\"_exit\": $?}") | stamp >"$O/cause_$tag.jsonl" &
  CHECK=$!
  if [ "$mode" = loader-kill ]; then  # the worker dies while check watches: its first line
    for _ in $(seq 1 60); do [ -s "$O/cause_$tag.jsonl" ] && break; sleep 0.5; done
    touch "$go"
  fi
  wait "$CHECK"
  if [ -n "${SMI:-}" ]; then
    kill "$SMI" 2>/dev/null
    SMI=
    say "  NVML medians (GPU: util %, mem_util %, power W / limit) during $case:"
    "$PY" - "$O/cause_$tag.nvml.csv" <<'PY' | tee -a "$S"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        rows.setdefault(int(f[0]), []).append([float(x) for x in f[1:5]])
    except (ValueError, IndexError):
        continue  # nvidia-smi's own message or a value it calls [N/A]
for g, r in sorted(rows.items()):
    u, m, p, lim = (statistics.median(c) for c in zip(*r))
    print(f"    GPU {g}: {u:.0f}, {m:.0f}, {p:.0f} / {lim:.0f} W ({p / lim:.0%}), {len(r)} samples")
PY
  fi
  "$PY" - "$O/cause_$tag.jsonl" "$log" "$mode" "$NPROC" "$case" <<'PY' | tee -a "$S"
import json, re, sys
path, log, mode, nproc, case = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
culprit = nproc - 1
out = open(log).read()
m = re.search(rf"READY rank={culprit} pid=(\d+) t=(\d+\.\d+)", out)
kill = re.search(r"KILL pid=(\d+) t=(\d+\.\d+)", out)  # loader-kill: the worker's death
onset = float(kill.group(2)) if kill else float(m.group(2)) if m else None
want = {
    "gil": r"thread `stats` holds the GIL in parse_record",
    "poll": r"spins in poll_ready",
    "loader": rf"DataLoader worker 1 of rank {culprit} \(pid \d+\) is stuck in fetch_record",
    "loader-kill": (
        rf"rank {culprit} died: its DataLoader worker \(pid {kill.group(1) if kill else '?'}\) "
        r"was killed by (SIGKILL|the OOM killer)"
    ),
}[mode]
for d in lines:
    rel = f"{d['_arrived'] - onset:+6.1f}s" if onset else "?"
    print(f"  {rel} {d['state']:8s} {d['reason'][:160]}")
said = lambda d: [d["reason"], *(d.get("findings") or [])]  # noqa: E731
hit = next((d for d in lines if any(re.search(want, s) for s in said(d))), None)
away = any("on another node" in s for d in lines for s in said(d))
busy = any(d["state"] == "busy" for d in lines)
if hit is None:
    print(f"FAIL {case}: exit {rc}; nothing named the cause ({want})")
else:
    line = next(s for s in said(hit) if re.search(want, s))
    took = f"+{hit['_arrived'] - onset:.1f} s after the onset" if onset else "?"
    gputui = f"+{hit['t'] - hit['since']:.1f} s after the spin" if hit.get("since") else ""
    ok = rc not in (0, None) and not busy and not away
    print(f"{'PASS' if ok else 'FAIL'} {case}: exit {rc}; {took} ({gputui}): {line[:220]}"
          + ("; said busy" if busy else "") + ("; said 'on another node'" if away else ""))
PY
  head -3 "$O/cause_$tag.check.err" | tee -a "$S"
  stop_all
done
