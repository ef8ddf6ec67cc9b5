#!/usr/bin/env bash
# History files: a real 4-rank NCCL hang on 4 x H200, logged by `dcgmi dmon` as a node running
# DCGM logs it, read back by `gputui check --replay` and `snapshot --replay`
# (gputui/collect/trace/dcgmi.py). One rank per GPU (multi_worker.py --spawn 4 stuck: rank 3
# sleeps in its data loader from +8 s, ranks 0-2 wait in all_reduce), dmon beside it from
# before the job starts:
#   { echo "#time start=... d=500"; dcgmi dmon -e 203,204,155,160,252,150,100,101 -d 500; }
# then SIGINT to dmon (its last words end the file), as a person's Ctrl-C. Where DCGM is not
# installed (no dcgmi, or no host engine answers), scripts/device/dmon_text.py writes the same
# table from NVML; the summary says which wrote it. Expected: `check --replay` exits 1, its
# last line hung, suspects [3]; `snapshot --replay` exits 1 too. The log is kept
# ($OUT/dcgmi_dmon.txt) as test data of dmon's real text. About 2 minutes:
#   LIMIT=200 bash scripts/device/run_all.sh dm check_dcgmi
# On the CPU (no ranks: the stand-in libnvidia-ml.so.1 from tests/nvml_standin plays the hang,
# GPU 0 spinning while GPU 1 idles for 25 s: stalled, suspects [1]):
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/dm PYTHON=.venv/bin/python bash scripts/device/check_dcgmi.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O="${OUT:?}"
S="$O/dcgmi_summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
. scripts/device/common.sh
PY="${PYTHON:-python3}"
DRY="${GPUTUI_DEVICE_DRYRUN:-0}"
JOB= DMON= ENGINE=
stop_all() {
  [ -n "$DMON" ] && kill -INT "$DMON" 2>/dev/null && sleep 1 && kill "$DMON" 2>/dev/null
  DMON=
  stop_group "$JOB"
  JOB=
  [ -n "$ENGINE" ] && kill "$ENGINE" 2>/dev/null
  ENGINE=
}
trap stop_all EXIT
trap 'stop_all; exit 143' TERM INT
LOG="$O/dcgmi_dmon.txt"
HANG_S=75  # past hang_after (60 s) from the onset: the file holds stalled, then hung

if [ "$DRY" = 1 ]; then
  gcc -shared -fPIC -O1 -o "$O/libnvidia-ml.so.1" tests/nvml_standin/standin.c -lpthread || exit 1
  export LD_LIBRARY_PATH="$O${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GPUTUI_STANDIN_NVML="spin_gpu:0" PYTHONPATH="$PWD"
  WANT=1 STATE=stalled HANG_S=25
  say "INFO dry run: no ranks; the stand-in NVML (GPU 0 spins, GPU 1 idles), dmon_text.py"
else
  N=$(nvidia-smi -L | wc -l); [ "$N" -gt 4 ] && N=4  # one rank per GPU, up to 4
  WANT=$((N - 1)) STATE=hung
  say "INFO $(nvidia-smi -L | head -1) x $(nvidia-smi -L | wc -l); $N ranks, rank $WANT stuck"
fi

WRITER=dmon_text.py
if [ "$DRY" != 1 ] && command -v dcgmi >/dev/null; then
  if ! timeout 10 dcgmi discovery -l >/dev/null 2>&1 && command -v nv-hostengine >/dev/null; then
    nv-hostengine -n -f "$O/nv-hostengine.log" >/dev/null 2>&1 &
    ENGINE=$!
    for _ in $(seq 1 20); do timeout 5 dcgmi discovery -l >/dev/null 2>&1 && break; sleep 0.5; done
  fi
  timeout 10 dcgmi discovery -l >/dev/null 2>&1 && WRITER=dcgmi
fi
say "INFO dmon written by: $WRITER"
command -v dcgmi >/dev/null && say "INFO $(dcgmi --version 2>&1 | head -2 | tr '\n' ' ')"
echo "#time start=$(date -u +%FT%T.%NZ | cut -c1-23)Z d=500" >"$LOG"
if [ "$WRITER" = dcgmi ]; then
  dcgmi dmon -e 203,204,155,160,252,150,100,101 -d 500 >>"$LOG" 2>"$O/dcgmi_dmon.err" &
else
  "$PY" scripts/device/dmon_text.py -d 500 >>"$LOG" 2>"$O/dcgmi_dmon.err" &
fi
DMON=$!

if [ "$DRY" != 1 ]; then
  jl="$O/dcgmi_job.txt"
  setsid python3 scripts/device/multi_worker.py --spawn "$N" stuck $((HANG_S + 40)) --onset 8 \
    --odd "$WANT" >"$jl" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do grep -q '^ONSET' "$jl" && break; sleep 0.5; done
  grep -q '^ONSET' "$jl" || { say "FAIL the job did not reach its onset"; tail -15 "$jl" >>"$S"; exit 1; }
  say "INFO $(grep '^ONSET' "$jl" | head -1)"
fi
sleep "$HANG_S"  # the hang, as dmon logs it (a wait of the device script, not of a test)
kill -INT "$DMON" 2>/dev/null
for _ in $(seq 1 10); do kill -0 "$DMON" 2>/dev/null || break; sleep 0.5; done
kill "$DMON" 2>/dev/null
DMON=
stop_group "$JOB"
JOB=
say "INFO $(wc -l <"$LOG") lines; first rows:"
sed -n 2,5p "$LOG" | tee -a "$S"
say "INFO last line: $(tail -1 "$LOG")"

timeout 60 "$PY" -m gputui check --replay "$LOG" >"$O/dcgmi_check.txt" 2>"$O/dcgmi_check.err"
rc=$?
timeout 60 "$PY" -m gputui check --replay "$LOG" --json >"$O/dcgmi_check.jsonl" 2>>"$O/dcgmi_check.err"
timeout 60 "$PY" -m gputui snapshot --replay "$LOG" --json >"$O/dcgmi_snapshot.json" 2>"$O/dcgmi_snapshot.err"
src=$?
grep -E '^(gputui check|final:)' "$O/dcgmi_check.txt" | cut -c1-400 | tee -a "$S"
[ -s "$O/dcgmi_check.err" ] && { say "stderr:"; head -3 "$O/dcgmi_check.err" | tee -a "$S"; }
"$PY" - "$O/dcgmi_check.jsonl" "$rc" "$src" "$WANT" "$STATE" <<'PY' | tee -a "$S"
import json, sys
path, rc, src, want, state = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lines = [json.loads(x) for x in open(path) if x.strip()]
last = lines[-1] if lines else {}
first = next((d for d in lines if d.get("state") in ("stalled", "hung")), None)
t0 = lines[0]["t"] if lines else 0
print(f"check exit {rc}, snapshot exit {src}; last: {last.get('state')} suspects {last.get('suspects')}"
      + (f"; first alarm at +{first['t'] - t0:.1f} s into the file" if first else ""))
ok = rc == 1 and src == 1 and last.get("state") == state and last.get("suspects") == [want]
print(("PASS" if ok else "FAIL") + f" dmon's text of a hang: {state}, GPU {want} named")
PY
