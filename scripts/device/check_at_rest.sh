#!/usr/bin/env bash
# Issue 44 item 7 on a 4-GPU node: the dashboard at rest beside nvitop.
#   LIMIT=240 bash scripts/device/run_all.sh rest check_at_rest     (nvitop's wheel in .whl/)
#   GPUTUI_DEVICE_DRYRUN=1 OUT=/tmp/rest bash scripts/device/check_at_rest.sh   (CPU box)
#
# At rest: no job, the 4 GPUs idle, each app refreshing once a second in a 160x50 tmux pane.
#   1. bench/app_cpu.py --apps gputui nvitop floor: the three together for 60 s (CPU % of a
#      core, peak RSS), then 3 starts of each alone (first frame); .pyc present (as pip leaves
#      them). RESULT lines: gputui / nvitop against the targets (CPU 0.5x, peak RSS 1.2x).
#   2. bench/first_frame.py --modes live: the modules imported at the first frame (and their
#      names in rest_modules.txt), 3 starts.
#   3. the dashboard's CPU per thread over 20 s at rest (clock ticks, and ms from schedstat):
#      where what is left goes.
# GPUTUI_DEVICE_DRYRUN=1: no GPU and no nvitop (gputui shows the host's processes), 10 s windows.
set -u
O="${OUT:?}"
S="$O/at_rest.txt"
mkdir -p "$O"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
DRY="${GPUTUI_DEVICE_DRYRUN:-0}"
PY="${PY:-python3}"
cleanup() { tmux -L rest kill-server 2>/dev/null; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM INT

if [ "$DRY" = 1 ]; then
  apps=(gputui floor) window=10 starts=1
  say "INFO dry run: no GPU, no nvitop; $(nproc) cores"
else
  apps=(gputui nvitop floor) window=60 starts=3
  # REST_ARENA=N: also gputui with glibc's malloc arenas capped at N, beside the others
  [ -n "${REST_ARENA:-}" ] && apps+=("gputui-arena${REST_ARENA}=env MALLOC_ARENA_MAX=${REST_ARENA} $PY -m gputui")
  say "INFO $(nvidia-smi -L | tr '\n' ';'); $(nproc) cores; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  pynvml_dir=$("$PY" -c 'import os, pynvml; print(os.path.dirname(pynvml.__file__))')
  "$PY" -m compileall -q -j 0 /tmp/site "$PWD/gputui" "$pynvml_dir" >/dev/null 2>&1
fi

# ---------------------------------------------------------------- 0. memory, call by call
if [ "$DRY" != 1 ]; then
  for extra in "" "--arena-max 2"; do
    say "== NVML step by step ${extra:-(glibc default arenas)}"
    # shellcheck disable=SC2086  # the option and its value are two words
    timeout -k 5 120 "$PY" scripts/device/rest_nvml_steps.py $extra 2>&1 | tee -a "$S"
  done
fi

# ---------------------------------------------------------------- 1. CPU and peak RSS
(cd bench && timeout -k 5 $((window + 90)) "$PY" app_cpu.py --apps "${apps[@]}" \
  --duration "$window" --warmup 3 --frames "$starts" --frame-timeout 20 --interval 1 \
  --size 160x50 --runner auto --nvitop "$PY -m nvitop" --gputui "$PY -m gputui" \
  --json "$O/rest_app.json") >"$O/rest_app.txt" 2>&1
say "== together ${window} s at rest, then ${starts} start(s) alone: exit $?"
tail -12 "$O/rest_app.txt" | tee -a "$S"
"$PY" - "$O/rest_app.json" <<'PY' | tee -a "$S"
import json, sys
try:
    res = json.load(open(sys.argv[1]))["result"]
except (OSError, ValueError, KeyError) as e:
    print(f"FAIL no result: {e}")
    raise SystemExit
apps = {a["app"]: a for a in res["apps"]}
g = apps.get("gputui", {})
print(f"RESULT gputui at rest: CPU {g.get('cpu_percent')} % of a core, peak RSS {g.get('peak_rss_mb')} MiB")
for key, target, what in (("cpu", 0.5, "idle CPU"), ("rss", 1.2, "peak RSS")):
    r = res.get(f"{key}_ratio_gputui_over_nvitop")
    if r is None:
        print(f"INFO {what}: no nvitop figure to compare with")
        continue
    verdict = "PASS" if r <= target else "MISS"
    print(f"{verdict} {what} gputui / nvitop = {r:.2f}x (target {target}x)")
PY

# ---------------------------------------------------------------- 2. modules at the first frame
GPUTUI_BENCH_MODULES="$O/rest_modules.txt" timeout -k 5 120 "$PY" bench/first_frame.py \
  --modes live --starts "$starts" >"$O/rest_first_frame.txt" 2>&1
say "== first frame, live, ${starts} start(s): exit $?"
head -2 "$O/rest_first_frame.txt" | tee -a "$S"
if [ -s "$O/rest_modules.txt" ]; then
  say "RESULT modules at the first frame: $(wc -l <"$O/rest_modules.txt"), gputui's $(grep -c '^gputui' "$O/rest_modules.txt")"
fi

# ---------------------------------------------------------------- 3. CPU per thread at rest
tmux -L rest new-session -d -s rest -x 160 -y 50 "$PY -m gputui"
pid=
for _ in $(seq 1 40); do
  pid=$(pgrep -f "^$PY -m gputui\$" | head -1)
  [ -n "$pid" ] && break
  sleep 0.25
done
if [ -n "$pid" ]; then
  sleep 5  # past the start-up: at rest
  names() {  # TID NAME: Python's thread names as py-spy reads them, else the kernel's
    spy=$(command -v py-spy || echo "$(dirname "$(command -v "$PY")")/py-spy")
    if [ -x "$spy" ]; then
      timeout 20 "$spy" dump -p "$pid" --nonblocking 2>/dev/null |
        sed -n 's/^Thread \([0-9]*\) ([^)]*): "\([^"]*\)".*/\1 \2/p'
    fi
    for t in /proc/"$pid"/task/*; do echo "${t##*/} $(tr ' ' '_' <"$t/comm")"; done
  }
  # TID UTIME STIME NS: clock ticks from stat, and nanoseconds on a CPU from schedstat (a
  # tick is 10 ms: 5 ticks in 20 s cannot tell 45 ms from 55)
  ticks() {
    for t in /proc/"$pid"/task/*; do
      echo "${t##*/} $(cut -d' ' -f14,15 "$t/stat") $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)"
    done
  }
  names >"$O/rest_threads.txt"
  ticks >"$O/rest_ticks0.txt"
  sleep 20
  ticks >"$O/rest_ticks1.txt"
  say "== the dashboard's CPU ticks (1/$(getconf CLK_TCK) s) per thread over 20 s at rest"
  "$PY" - "$O/rest_threads.txt" "$O/rest_ticks0.txt" "$O/rest_ticks1.txt" <<'PY' | tee -a "$S"
import sys
names = {}
for ln in open(sys.argv[1]):
    if " " in ln.strip():
        tid, name = ln.split(maxsplit=1)
        names.setdefault(tid, name.strip())  # py-spy's name first
def read(path, ns=False):
    rows = (ln.split() for ln in open(path))
    return {f[0]: int(f[3]) if ns else int(f[1]) + int(f[2]) for f in rows if len(f) == 4}
a, b = read(sys.argv[2]), read(sys.argv[3])
rows = sorted(((b[t] - a.get(t, 0), names.get(t, t).strip()) for t in b), reverse=True)
print(f"total {sum(d for d, _ in rows)} ticks: " + ", ".join(f"{n} {d}" for d, n in rows if d))
a, b = read(sys.argv[2], True), read(sys.argv[3], True)
rows = sorted((((b[t] - a.get(t, 0)) / 1e6, names.get(t, t).strip()) for t in b), reverse=True)
print(f"total {sum(d for d, _ in rows):.0f} ms on a CPU: "
      + ", ".join(f"{n} {d:.1f}" for d, n in rows if d >= 0.05))
PY
else
  say "FAIL the dashboard did not start in its pane"
fi
cleanup
say "INFO done"
