"""The alert rules and the dashboard against a real Prometheus (Debian's `prometheus` package).

- `promtool check rules` / `check config` / `test rules` on deploy/prometheus/.
- End to end: `gputui exporter --demo` replays the real 2 x H200 NCCL hang at 0.6 x speed on
  loopback; a Prometheus started here scrapes it every second with the project's rules,
  every `for:` divided by FOR_SCALE (the file's own durations are checked in simulated time
  by `promtool test rules` above); its HTTP API must show GputuiJobStalled pending, then
  firing `for:` later with the suspect GPU in its labels, then gone when the job is gone,
  and no other alert. Why 0.6 x: the detector holds the recording's stall for ~24 s of
  recording time; stretched to ~40 s, it outlasts the scaled `for: 1m` (15 s) as a real
  stall outlasts the minute. About 45 s of wall time in all.
- The Grafana dashboard's queries name only exported metrics, and each parses in Prometheus.

Skipped, with the reason, where prometheus/promtool are not installed (a laptop); under CI
(CI set) their absence is a failure, since .ci/run installs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import REPO
from prometheus_proc import PrometheusProc
from test_exporter_cli import DEMO_SPIN_START, start_exporter

from gputui.exporter.metrics import exported_names

PROM_DIR = REPO / "deploy" / "prometheus"
RULES = PROM_DIR / "gputui-rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "gputui-dashboard.json"
MISSING = [t for t in ("prometheus", "promtool") if shutil.which(t) is None]

if MISSING and os.environ.get("CI"):
    pytest.fail(f"CI must install {' and '.join(MISSING)} (.ci/run does)", pytrace=False)
needs_prometheus = pytest.mark.skipif(
    bool(MISSING),
    reason=f"{' and '.join(MISSING)} not installed (apt-get install prometheus; CI has it)",
)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


# ---------------------------------------------------------------- promtool


@needs_prometheus
def test_the_rules_file_passes_promtool_check_rules():
    r = promtool("check", "rules", str(RULES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 6 rules found" in r.stdout


@needs_prometheus
def test_the_example_prometheus_config_passes_promtool_check_config():
    r = promtool("check", "config", str(PROM_DIR / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


@needs_prometheus
def test_the_rule_unit_tests_pass():
    tests = sorted(str(p) for p in (PROM_DIR / "tests").glob("*.yml"))
    assert tests
    r = promtool("test", "rules", *tests)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout + r.stderr


def test_every_rule_has_a_promtool_unit_test():
    rules = re.findall(r"^\s*- alert: (\w+)", RULES.read_text(), re.M)
    tested = "".join(p.read_text() for p in (PROM_DIR / "tests").glob("*.yml"))
    assert len(rules) == 6
    for name in rules:
        assert f"alertname: {name}" in tested, name


# ---------------------------------------------------------------- the dashboard


def dashboard_queries() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def test_the_dashboard_queries_only_metrics_the_exporter_serves():
    names = set(exported_names())
    for expr in dashboard_queries():
        used = set(re.findall(r"\bgputui_[a-z_]+", expr))
        assert used and used <= names, expr


# ---------------------------------------------------------------- a real Prometheus


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def parse_time(text: str) -> float:
    """Prometheus' RFC 3339 time with nanoseconds -> Unix seconds."""
    text = re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).astimezone(timezone.utc).timestamp()


FOR_SCALE = 4  # `for: 1m` -> 15 s in the end-to-end run


def scaled_rules(tmp: Path) -> Path:
    """The project's rules with every `for:` divided by FOR_SCALE, and nothing else changed."""
    units = {"s": 1, "m": 60, "h": 3600}

    def scale(m: re.Match[str]) -> str:
        seconds = int(m.group(2)) * units[m.group(3)]
        return f"{m.group(1)}{max(1, seconds // FOR_SCALE)}s"

    text, n = re.subn(r"(\bfor:\s*)(\d+)([smh])\b", scale, RULES.read_text())
    assert n >= 4, "every rule has a `for:`"
    out = tmp / "gputui-rules.yml"
    out.write_text(text)
    return out


class Prometheus(PrometheusProc):
    def __init__(self, tmp: Path, target: str, rules: Path = RULES) -> None:
        cfg = tmp / "prometheus.yml"
        cfg.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{rules}']\n"
            "scrape_configs:\n"
            "  - job_name: gputui\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self._launch(tmp, cfg, [f"--storage.tsdb.path={tmp / 'data'}"], 30)

    def alerts(self) -> list[dict]:
        return get(self.url + "/api/v1/alerts")["data"]["alerts"]

    def query(self, expr: str) -> dict:
        return get(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))


@needs_prometheus
@pytest.mark.timeout(300)
def test_a_real_prometheus_fires_the_stalled_alert_on_the_demo_hang_and_clears_it(tmp_path):
    t0 = time.time()
    exporter = start_exporter("--demo", "--start", str(DEMO_SPIN_START), "--speed", "0.6")
    prom = None
    try:
        target = exporter.url.split("//", 1)[1].split("/", 1)[0]
        prom = Prometheus(tmp_path, target, scaled_rules(tmp_path))
        host = "demo-h200x2-hang"  # a replay's series name the recorded node, as `check` does

        # While the job runs into its hang: the dashboard's queries all parse here.
        for expr in dashboard_queries():
            r = prom.query(expr.replace("$host", ".*"))
            assert r["status"] == "success", (expr, r)

        seen: dict[str, set[str]] = {}  # alertname -> states seen
        pending_at = firing = None
        end = time.monotonic() + 240
        while firing is None and time.monotonic() < end:
            for a in prom.alerts():
                seen.setdefault(a["labels"]["alertname"], set()).add(a["state"])
                if a["labels"]["alertname"] != "GputuiJobStalled":
                    continue
                if a["state"] == "pending" and pending_at is None:
                    pending_at = time.time()
                if a["state"] == "firing":
                    firing = (a, time.time())
            time.sleep(0.5)  # the poll's pace; the bound is `end`
        assert firing is not None, f"GputuiJobStalled never fired; seen {seen}"
        alert, fired_at = firing
        assert pending_at is not None, "it fired without being pending first"
        # `for: 1m` scaled: it fired 15 s after it became active, not before.
        assert fired_at - parse_time(alert["activeAt"]) >= 60 / FOR_SCALE - 1
        labels = alert["labels"]
        assert labels["gpu"] == "1" and labels["rank"] == "1" and labels["pid"] == "815"
        assert labels["job"] == "master:127.0.0.1:29512" and labels["host"] == host
        assert labels["severity"] == "warning"
        assert "suspect GPU 1 (rank 1)" in alert["annotations"]["summary"]

        # The recording's job is then killed: the alert clears.
        end = time.monotonic() + 90
        while time.monotonic() < end:
            active = [a for a in prom.alerts() if a["labels"]["alertname"] == "GputuiJobStalled"]
            if not active:
                break
            time.sleep(0.5)  # the poll's pace; the bound is `end`
        assert not active, f"GputuiJobStalled did not clear: {active}"
        print(  # shown with -s: the figures of this run
            f"pending at +{pending_at - t0:.0f} s, firing at +{fired_at - t0:.0f} s, "
            f"cleared by +{time.time() - t0:.0f} s after the exporter started"
        )
        assert prom.query('ALERTS{alertname="GputuiJobStalled"}')["data"]["result"] == []
        # The demo's stall never reaches `hung` (34 s of spinning), NVML never stalls, and
        # the spinning GPU always had its process: no other alert was ever active.
        assert set(seen) == {"GputuiJobStalled"}, seen
        scraped = prom.query('up{job="gputui"}')["data"]["result"]
        assert scraped and scraped[0]["value"][1] == "1"
    finally:
        if prom is not None:
            prom.stop()
        exporter.proc.terminate()
        exporter.proc.wait(timeout=15)
