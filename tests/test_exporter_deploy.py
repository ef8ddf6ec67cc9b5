"""The deployment examples keep the promised defaults: no ptrace, localhost, honor_labels.

Text checks on the uncommented lines (the files explain the opt-ins in comments), and
`systemd-analyze verify` on the unit where systemd is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import REPO

DEPLOY = REPO / "deploy"
UNIT = DEPLOY / "systemd" / "gputui-exporter.service"
DAEMONSET = DEPLOY / "kubernetes" / "gputui-exporter-daemonset.yaml"


def live_lines(path) -> list[str]:
    """The lines that take effect: comments and blank lines dropped."""
    out = []
    for line in path.read_text().splitlines():
        code = line.split("#", 1)[0].strip()
        if code:
            out.append(code)
    return out


def test_the_systemd_unit_runs_unprivileged_without_ptrace_on_localhost():
    lines = live_lines(UNIT)
    assert "DynamicUser=yes" in lines and "NoNewPrivileges=yes" in lines
    assert "CapabilityBoundingSet=" in lines and "AmbientCapabilities=" in lines
    assert not any("PTRACE" in x for x in lines)
    (start,) = [x for x in lines if x.startswith("ExecStart=")]
    assert "exporter --listen 127.0.0.1:9835" in start
    assert not any(x.startswith(("PrivateDevices=yes", "ProtectProc=invisible")) for x in lines)


def test_the_daemonset_has_no_ptrace_reads_host_pids_and_listens_on_loopback():
    lines = live_lines(DAEMONSET)
    text = "\n".join(lines)
    assert "PTRACE" not in text and "privileged: true" not in text
    assert "hostPID: true" in lines  # ranks, jobs and pods named (read only)
    assert "readOnlyRootFilesystem: true" in lines
    assert 'drop: ["ALL"]' in lines and "allowPrivilegeEscalation: false" in lines
    assert 'args: ["--listen", "127.0.0.1:9835", "--interval", "1"]' in lines
    assert "nvidia.com/gpu:" not in text  # requests no GPU: it would take one from the jobs


def test_every_scrape_example_keeps_the_job_label():
    assert "honor_labels: true" in live_lines(DEPLOY / "prometheus" / "prometheus.yml")
    podmonitor = DEPLOY / "kubernetes" / "gputui-exporter-podmonitor.yaml"
    assert "honorLabels: true" in live_lines(podmonitor)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd not installed")
def test_the_systemd_unit_verifies(tmp_path):
    """systemd-analyze checks every directive; ExecStart points at a binary that exists
    here, since gputui is not installed under /opt on a test machine."""
    unit = tmp_path / "gputui-exporter.service"
    text = re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", UNIT.read_text(), flags=re.M)
    unit.write_text(text)
    r = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    problems = [x for x in (r.stdout + r.stderr).splitlines() if "gputui-exporter" in x]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def test_every_kubernetes_manifest_validates_against_the_api_schemas():
    """Offline: kubernetes-validate ships the API's JSON schemas; nothing is fetched."""
    kv = pytest.importorskip("kubernetes_validate")
    yaml = pytest.importorskip("yaml")
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None or doc.get("apiVersion", "").startswith("monitoring.coreos.com"):
                continue  # the PodMonitor is a CRD: no schema ships for it
            kv.validate(doc, "1.30.0", strict=True)


def test_the_daemonset_mounts_the_pod_resources_socket_read_only():
    yaml = pytest.importorskip("yaml")
    ds = yaml.safe_load(DAEMONSET.read_text())
    spec = ds["spec"]["template"]["spec"]
    (mount,) = spec["containers"][0]["volumeMounts"]
    assert mount == {
        "name": "pod-resources",
        "mountPath": "/var/lib/kubelet/pod-resources",
        "readOnly": True,
    }
    (vol,) = spec["volumes"]
    assert vol["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
