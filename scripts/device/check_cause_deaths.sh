#!/usr/bin/env bash
# Issue 41 items 4-8 on 4 GPUs (one rank per GPU, NCCL): the cause, not the clock. Each case is
# a real 4-rank job (scripts/device/cause_worker.py), each rank's stdout and stderr in files
# of its own; `gputui check --json` (--stall-after 10) starts once every rank is READY, and
# the case begins 3 s later (ONSET):
#   checkpoint  rank 1 torch.saves a big state dict, RAS on: must never be called stalled
#   oom         rank 1 dies of CUDA OOM: its cause quoted within 3 s of its exit
#   logdir      under torchrun --log-dir D --redirect 3, rank 2 raises: quoted from its own
#               log file (torchrun --monitor-interval 30, so that the agent does not end the
#               other ranks at once: what is measured is where the words are found)
#   vanish      under torchrun with its default monitor interval (0.1 s), rank 1 raises: the
#               agent ends ranks 0, 2, 3 at once and the whole job vanishes; the death is
#               quoted within 3 s ("rank 1 died: ..."; "ranks 0, 2, 3 were ended by their
#               launcher, torchrun (pid N)"), exit 1
#   mismatch    rank 0 in broadcast, 1-3 in all_reduce, flight recorder on: both collectives
#               in the first stalled line within 10 s of the onset
#   mismatch256 the same with 256 MiB collectives (NCCL's Simple protocol, as the recorded
#               h200x4 mismatch whose GPUs did read as spinning): if this passes while the
#               4 MiB one fails, the waiting kernel of the small-message protocols is what
#               NVML's spin rule misses
#   watchdog    rank 3 spins in its own code; the NCCL watchdog (20 s) times ranks 0-2 out:
#               "ranks 0-2 timed out in the NCCL watchdog after 20 s waiting for rank 3" (or,
#               once they are gone, "were ended by the NCCL watchdog"), within 30 s, exit 1
# Each collective is 4 MiB (NCCL's small-message protocols); every case but the dry run logs
# NVML's util, memory util and power every 0.5 s (nvidia-smi) to cd_CASE.nvml.csv, and the
# summary gives each GPU's median after the onset: on the first run (2026-11-28) waiting
# GPUs were never read as spinning, and these readings say which threshold they missed.
# Each case prints one summary line: the first line naming the cause, its time after the
# onset (after the death for deaths) and check's exit code. About 4 minutes:
#   LIMIT=240 bash scripts/device/run_all.sh cd check_cause_deaths
# Dry run on a CPU machine (gloo, no CUDA, the stand-in NVML of tests/nvml_standin):
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/cd PY=.venv/bin/python bash scripts/device/check_cause_deaths.sh
# It checks that the script runs end to end, not the verdicts: the stand-in spins every GPU
# for the whole run and keeps a dead rank's pid on its GPU, gloo's peers die with the first
# rank (NCCL's wait), gloo has no NCCL watchdog and no RAS answers.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
mkdir -p "$O"
S="$O/cause_deaths_summary.txt"
: >"$S"
PY="${PY:-python3}"
DRY="${GPUTUI_DEVICE_DRYRUN:-0}"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do stop_group "$p"; done
  PIDS=()
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT

GPUTUI_ENV=()
if [ "$DRY" = 1 ]; then
  lib="$O/nvml_standin"
  mkdir -p "$lib"
  gcc -shared -fPIC -O1 -o "$lib/libnvidia-ml.so.1" tests/nvml_standin/standin.c -lpthread ||
    { say "FAIL dry run: the stand-in NVML did not build"; exit 1; }
  GPUTUI_ENV=(env "LD_LIBRARY_PATH=$lib" GPUTUI_STANDIN_GPUS=4 GPUTUI_STANDIN_NVML=spin)
  say "INFO dry run: gloo on the CPU, the stand-in NVML ($lib), every GPU spinning"
else
  say "INFO $(nvidia-smi -L | head -4 | tr '\n' ';')"
fi

ready_pids() {  # the pids of READY lines in the files given, in rank order
  cat "$@" 2>/dev/null | grep -o 'READY rank=[0-9]* pid=[0-9]*' | sort -t= -k2 -n | cut -d= -f3
}

run_case() {
  local case=$1 dur=$2 dying=$3
  local go="/tmp/gputui_cd_go_$case" port=$((29700 + RANDOM % 200)) outs
  rm -f "$go" "$O/cd_${case}_exit"
  local fr=(env TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/gputui-cdpipe_
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/gputui-cddump_ TORCH_FR_BUFFER_SIZE=2000)
  if [ "$case" = vanish ]; then  # torchrun's default monitor interval: the job goes at once
    setsid "$PY" -m torch.distributed.run --nproc-per-node 4 --master-port "$port" \
      scripts/device/cause_worker.py vanish --go "$go" --dir "$O" >"$O/cd_vanish_agent.out" 2>&1 &
    PIDS+=($!)
    outs="$O/cd_vanish_agent.out"
  elif [ "$case" = logdir ]; then
    rm -rf "$O/cd_logdir_logs"
    setsid "$PY" -m torch.distributed.run --nproc-per-node 4 --master-port "$port" \
      --monitor-interval 30 --log-dir "$O/cd_logdir_logs" --redirect 3 \
      scripts/device/cause_worker.py logdir --go "$go" --dir "$O" >"$O/cd_logdir_agent.out" 2>&1 &
    PIDS+=($!)
    outs="$O/cd_logdir_logs/*/attempt_0/*/stdout.log"
  else
    for r in 0 1 2 3; do
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port setsid "${fr[@]}" "$PY" scripts/device/cause_worker.py "${case%256}" \
        --mib "$([ "$case" = mismatch256 ] && echo 256 || echo 4)" \
        --go "$go" --dir "$O" >"$O/cd_${case}_rank$r.out" 2>"$O/cd_${case}_rank$r.err" &
      PIDS+=($!)
    done
    outs="$O/cd_${case}_rank*.out"
  fi
  for _ in $(seq 1 240); do  # at most 120 s for the four ranks
    # shellcheck disable=SC2086
    [ "$(ready_pids $outs | wc -l)" -ge 4 ] && break
    sleep 0.5
  done
  # shellcheck disable=SC2086
  local pids; pids=$(ready_pids $outs | paste -sd,)
  if [ "$(echo "$pids" | tr , '\n' | grep -c .)" -lt 4 ]; then
    say "FAIL $case: the job did not start"
    # shellcheck disable=SC2086
    tail -5 $outs "$O"/cd_"${case}"_*.err "$O/cd_logdir_agent.out" 2>/dev/null | tee -a "$S"
    stop_all
    return
  fi
  if [ "$DRY" != 1 ]; then
    setsid timeout $((dur + 20)) nvidia-smi --format=csv,noheader,nounits -lms 500 \
      --query-gpu=timestamp,index,utilization.gpu,utilization.memory,power.draw,power.limit \
      >"$O/cd_$case.nvml.csv" 2>/dev/null &
    PIDS+=($!)
  fi
  (timeout $((dur + 40)) "${GPUTUI_ENV[@]}" env GPUTUI_STANDIN_PIDS="$pids" "$PY" -m gputui \
    check --json --duration "$dur" --interval 0.5 --stall-after 10 \
    2>"$O/cd_$case.check.err"; echo "{\"_exit\": $?}") | stamp >"$O/cd_$case.jsonl" &
  local chk=$!
  sleep 3  # gputui has sampled every rank alive (where each writes is remembered)
  touch "$go"
  if [ -n "$dying" ]; then
    local dpid; dpid=$(echo "$pids" | cut -d, -f$((dying + 1)))
    (for _ in $(seq 1 1200); do  # when the dying rank's process is gone (or a zombie)
      st=$(ps -o stat= -p "$dpid" 2>/dev/null)
      if [ -z "$st" ] || [[ "$st" == Z* ]]; then date +%s.%N >"$O/cd_${case}_exit"; break; fi
      sleep 0.05
    done) &
  fi
  wait "$chk"
  # shellcheck disable=SC2086
  "$PY" - "$case" "$O/cd_$case.jsonl" "$O/cd_${case}_exit" $outs <<'PY' | tee -a "$S"
import json, os, re, sys
case, path, exitf, *outs = sys.argv[1:]
lines = [json.loads(x) for x in open(path) if x.strip()]
rc = next((d["_exit"] for d in lines if "_exit" in d), None)
lines = [d for d in lines if "_exit" not in d]
text = "".join(open(p, errors="replace").read() for p in outs if os.path.exists(p))
onset = min((float(t) for t in re.findall(r"^ONSET t=([\d.]+)", text, re.M)), default=None)
died = float(open(exitf).read()) if os.path.exists(exitf) else None
zero = died or onset
want = {
    # The CPU allocator's words in a dry run: "can't allocate memory"
    "oom": lambda d: ("out of memory" in d["reason"].lower() or "allocate memory" in d["reason"])
    and "died" in d["reason"],
    "logdir": lambda d: "loss is NaN" in d["reason"] and "died" in d["reason"],
    "mismatch": lambda d: d["reason"].startswith("ranks in different collectives"),
    "mismatch256": lambda d: d["reason"].startswith("ranks in different collectives"),
    "vanish": lambda d: "loss is NaN" in d["reason"] and "died" in d["reason"],
    "watchdog": lambda d: any(
        "NCCL watchdog" in f and "waiting for rank 3" in f
        for f in [d["reason"], *(d.get("findings") or [])]
    ),
    "checkpoint": lambda d: d["state"] in ("stalled", "hung"),
}[case]
nv = path.replace(".jsonl", ".nvml.csv")
if os.path.exists(nv) and onset:
    import statistics, time as _t
    rows = {}
    for ln in open(nv, errors="replace"):
        f = [x.strip() for x in ln.split(",")]
        try:  # 2026/11/28 21:17:51.123, 0, 100, 0, 131.2, 700.0 (nvidia-smi: local time)
            ts = _t.mktime(_t.strptime(f[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            ts += float("0." + f[0].split(".")[1])
            gpu, util, mem, pw, lim = int(f[1]), float(f[2]), float(f[3]), float(f[4]), float(f[5])
        except (ValueError, IndexError):
            continue
        rows.setdefault(gpu, []).append((ts, util, mem, pw / lim if lim else float("nan")))
    for gpu, rs in sorted(rows.items()):
        after = [r for r in rs if r[0] >= onset + 2] or rs
        med = [statistics.median(r[k] for r in after) for k in (1, 2, 3)]
        print(f"  NVML GPU {gpu} after the onset (median of {len(after)}): util {med[0]:.0f}, "
              f"mem util {med[1]:.0f}, power {med[2]:.0%} of the limit")
for d in lines:
    rel = f"{d['_arrived'] - zero:+6.1f}s" if zero else "?"
    print(f"  {rel} {d['state']:8s} {d['reason'][:160]}")
hit = next((d for d in lines if want(d)), None)
at = f"{hit['_arrived'] - zero:+.1f} s after the {'death' if died else 'onset'}" if hit and zero else "never"
if case == "checkpoint":
    ok = hit is None and rc == 0
    busy = next((d["reason"] for d in lines if d["state"] == "busy"), "never said busy")
    print(f"{'PASS' if ok else 'FAIL'} checkpoint: stalled {at}; first busy line: {busy[:160]!r}; exit {rc}")
else:
    limit = {"oom": 3.0, "logdir": 3.0, "vanish": 3.0, "mismatch": 10.0, "mismatch256": 10.0, "watchdog": 30.0}[case]
    took = hit["_arrived"] - zero if hit and zero else None
    ok = took is not None and took <= limit and rc not in (0, None)
    line = hit["reason"] if hit else "-"
    if case == "watchdog" and hit:
        line += " | " + next((f for f in hit.get("findings") or [] if "NCCL watchdog" in f), "")
    if case == "vanish" and hit:
        line += " | " + " | ".join(f for f in hit.get("findings") or [] if "launcher" in f)
    print(f"{'PASS' if ok else 'FAIL'} {case}: {at}: {line[:300]!r}; exit {rc}")
PY
  stop_all
}

CASES=" ${CASES:-checkpoint oom logdir vanish mismatch mismatch256 watchdog} "
want() { [[ "$CASES" == *" $1 "* ]]; }
want checkpoint && run_case checkpoint 30 ""
want oom && run_case oom 20 1
want logdir && run_case logdir 20 2
want vanish && run_case vanish 20 1
want mismatch && run_case mismatch 25 ""
want mismatch256 && run_case mismatch256 20 ""
want watchdog && run_case watchdog 45 ""
rm -f /tmp/gputui_cd_go_* /tmp/gputui-cddump_* /tmp/gputui-cdpipe_* "$O"/ckpt_rank*.pt
