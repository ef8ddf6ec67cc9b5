#!/usr/bin/env bash
# Issue 14, part 2 of 2 (part 1 and how to run both: scripts/device/check_multigpu.sh): gputui against
# nvitop on the busy node, in the same run. An N-rank `heavy` job (scripts/device/multi_worker.py:
# back-to-back 256 MiB all_reduce on every GPU) runs throughout; meanwhile
#   bench/app_cpu.py --apps gputui nvitop floor --duration 60 --frames 3
# twice: with .pyc present, then with --no-pyc (every app compiles its modules at start).
# Figures: CPU over 60 s (% of a core), peak RSS, first frame (together, then 3 alone).
#   LIMIT=330 bash scripts/device/run_all.sh mg2 check_multigpu_app     # ~4 min (estimate)
# Needs nvitop and textual from the carried wheels; tmux from the carried debs if the tmux
# runner is wanted (the earlier figures used it), else app_cpu.py reads a pty itself.
# Dry run without a GPU (gputui and the floor only: nvitop shows nothing without a GPU):
#   MULTIGPU_DRY=1 OUT=/tmp/mg bash scripts/device/check_multigpu_app.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
O="${OUT:?set OUT to the output directory}"
mkdir -p "$O"
S="$O/multigpu_summary.txt"
touch "$S"
say() { echo "$*" | tee -a "$S"; }
DRY=${MULTIGPU_DRY:-}
if [ -n "$DRY" ]; then
  N=${MULTIGPU_RANKS:-4} BACKEND=gloo DURATION=${MULTIGPU_APP_S:-10}
else
  N=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
  BACKEND=nccl DURATION=60
fi
if [ "$N" -lt 2 ]; then
  say "FAIL app vs nvitop: $N GPUs here"
  exit 1
fi

JOB=
. scripts/device/common.sh
stop_job() { stop_group "$JOB"; JOB=; }
trap stop_job EXIT
trap 'stop_job; exit 143' TERM INT  # timeout(1) from run_all.sh: the setsid job too

log="$O/mg_heavy_job.txt"
setsid python3 scripts/device/multi_worker.py --spawn "$N" heavy 400 --backend "$BACKEND" >"$log" 2>&1 &
JOB=$!
for _ in $(seq 1 180); do  # at most 90 s for every rank to be ready
  [ "$(grep -c '^READY rank=' "$log")" -ge "$N" ] && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 0.5
done
ready=$(grep -c '^READY rank=' "$log")
if [ "$ready" -lt "$N" ]; then
  say "FAIL app vs nvitop: the heavy job did not start ($ready/$N ranks)"
  tail -20 "$log" | tee -a "$S"
  exit 1
fi
nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,power.draw \
  --format=csv,noheader >"$O/mg_heavy_smi.txt" 2>&1
say "INFO heavy job: $N ranks busy; GPUs: $(tr '\n' ';' <"$O/mg_heavy_smi.txt" | cut -c1-300)"

APPS=(gputui nvitop floor)
[ -n "$DRY" ] && APPS=(gputui floor)
for pyc in present absent; do
  extra=()
  [ "$pyc" = absent ] && extra=(--no-pyc)
  out="$O/mg_app_pyc_$pyc"
  (cd bench && timeout -k 5 150 python3 app_cpu.py --apps "${APPS[@]}" --duration "$DURATION" \
    --frames 3 --frame-timeout 20 --interval 1 --size 160x50 --runner auto \
    --nvitop "python3 -m nvitop" --gputui "python3 -m gputui" "${extra[@]}" \
    --json "$out.json") >"$out.txt" 2>&1
  rc=$?
  python3 - "$out.json" "$rc" "$pyc" "$N" <<'PY' | tee -a "$S"
import json, sys
path, rc, pyc, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:
    res = json.load(open(path))["result"]
except Exception as e:
    print(f"FAIL app vs nvitop (.pyc {pyc}): exit {rc}, no JSON ({type(e).__name__})"); sys.exit()
def f(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"
parts = []
for a in res["apps"]:
    med = res["first_frame_median_s"].get(a["app"])
    parts.append(f"{a['app']} CPU {f(a.get('cpu_percent'))}% RSS {f(a.get('peak_rss_mb'), 1)} MiB "
                 f"first frame {f(a.get('first_frame_s'))} s (alone, median {f(med)} s)"
                 + (f" ERROR {a['error']}" if a.get("error") else ""))
ratio = res.get("cpu_ratio_gputui_over_nvitop")
ok = rc == 0 and not res["first_frame_errors"]
print(f"{'PASS' if ok else 'FAIL'} app vs nvitop, .pyc {pyc}, {n} busy GPUs, {res['runner']} runner, "
      f"CPU over {res['duration_s']:g} s: " + "; ".join(parts)
      + (f"; gputui/nvitop CPU x{ratio:.2f}" if ratio else "")
      + "".join(f"; skipped {s}" for s in res["skipped"]))
PY
done
stop_job
