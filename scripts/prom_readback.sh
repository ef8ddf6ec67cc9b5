#!/usr/bin/env bash
# Read an OpenMetrics file of dcgm-exporter series (plain or .gz; the one
# scripts/device/check_prom_history.sh writes) back through a real, throw-away Prometheus:
#   bash scripts/prom_readback.sh FILE [gputui check options, e.g. --json]
# It backfills FILE with `promtool tsdb create-blocks-from openmetrics` into a temporary
# directory, starts `prometheus` on a free loopback port against it (waiting for /-/ready,
# 60 s at most), runs `gputui check --prometheus URL --from FIRST --to LAST --step 1` over
# the file's own time span (1 Hz samples), prints its output, stops the server and exits
# with check's exit code (1: a hang found).
set -u
FILE="${1:?usage: prom_readback.sh FILE [check options]}"
shift
command -v prometheus >/dev/null && command -v promtool >/dev/null \
  || { echo "prom_readback: needs prometheus and promtool (apt-get install prometheus)" >&2; exit 2; }
TMP=$(mktemp -d)
PROM=
cleanup() { [ -n "$PROM" ] && kill "$PROM" 2>/dev/null && wait "$PROM" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
case "$FILE" in
  *.gz) gzip -dc "$FILE" >"$TMP/in.om" ;;
  *) cp "$FILE" "$TMP/in.om" ;;
esac
read -r FIRST LAST < <(python3 - "$TMP/in.om" <<'PY'
import sys
ts = [float(line.rsplit(" ", 1)[1]) for line in open(sys.argv[1]) if line[0] != "#"]
print(f"{min(ts):.3f} {max(ts):.3f}")
PY
)
promtool tsdb create-blocks-from openmetrics "$TMP/in.om" "$TMP/data" >"$TMP/promtool.log" 2>&1 \
  || { echo "prom_readback: promtool failed:" >&2; tail -5 "$TMP/promtool.log" >&2; exit 2; }
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'global: {scrape_interval: 1h}\n' >"$TMP/prometheus.yml"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
  --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$PORT" >"$TMP/prom.log" 2>&1 &
PROM=$!
URL="http://127.0.0.1:$PORT"
python3 - "$URL" <<'PY' || { echo "prom_readback: prometheus did not start" >&2; tail -5 "$TMP/prom.log" >&2; exit 2; }
import sys, time, urllib.request
end = time.monotonic() + 60
while time.monotonic() < end:
    try:
        with urllib.request.urlopen(sys.argv[1] + "/-/ready", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(1)
PY
echo "prom_readback: $FILE at $URL, $FIRST .. $LAST" >&2
python3 -m gputui check --prometheus "$URL" --from "$FIRST" --to "$LAST" --step 1 "$@"
