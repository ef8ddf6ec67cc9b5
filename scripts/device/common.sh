# Shared by the device checks (sourced): ending a job's process group, raw RAS answers, JSON
# lines stamped with their arrival time.

# stop_group PGID: SIGTERM the whole process group, up to 3 s, then SIGKILL.
stop_group() {
  [ -n "${1:-}" ] || return 0
  kill -TERM -- -"$1" 2>/dev/null
  for _ in 1 2 3 4 5 6; do kill -0 -- -"$1" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- -"$1" 2>/dev/null
}

# ras_raw DIR NAME: the RAS thread's answers on 127.0.0.1:28028, text and JSON, unchanged,
# to DIR/ras-NAME-text.txt and DIR/ras-NAME-json.txt, with their latency on stdout.
ras_raw() {
  python3 - "$1" "$2" <<'PY'
import socket, sys, time
out, tag = sys.argv[1], sys.argv[2]
for name, cmds in (("text", b"VERBOSE STATUS\n"), ("json", b"SET FORMAT json\nVERBOSE STATUS\n")):
    t = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", 28028), timeout=5)
        s.sendall(cmds)
        s.settimeout(15)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    except OSError as e:
        print(f"RAS {tag} {name}: {type(e).__name__}: {e}")
        continue
    took = time.monotonic() - t
    open(f"{out}/ras-{tag}-{name}.txt", "wb").write(data)
    print(f"RAS {tag} {name}: {len(data)} bytes in {took * 1000:.1f} ms")
PY
}

# stamp: each JSON line of stdin with its arrival time added as "_arrived" (onset-to-verdict
# times are measured from these).
stamp() {
  python3 -c '
import json, sys, time
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    d["_arrived"] = time.time()
    print(json.dumps(d), flush=True)
'
}

# busy_gpu LOG PORT SECONDS: compile .pyc for what the apps import (as pip leaves an install;
# the image writes none), then start the 1-rank training job (train_worker.py) that keeps
# GPU 0 busy; sets JOB to its process group and returns once it trains (1 if it did not).
busy_gpu() {
  local pynvml_dir
  pynvml_dir=$(python3 -c 'import os, pynvml; print(os.path.dirname(pynvml.__file__))')
  python3 -m compileall -q -j 0 /tmp/site "$PWD/gputui" "$pynvml_dir" >/dev/null 2>&1
  setsid python3 -m torch.distributed.run --nproc-per-node 1 --master-port "$2" \
    scripts/device/train_worker.py "$3" >"$1" 2>&1 &
  JOB=$!
  for _ in $(seq 1 120); do grep -q '^READY' "$1" && break; sleep 0.5; done
  grep -q '^READY' "$1" || { tail -20 "$1"; return 1; }
  sleep 2
}
