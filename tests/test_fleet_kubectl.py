"""`gputui fleet --launcher kubectl`: pods reached with `kubectl exec`, bounded like hosts.

No cluster runs here, so a stand-in `kubectl` (a small script first on PATH) plays the API
server's part: `get pods -o json` lists pods from a file, and `exec POD -- ARGS` runs ARGS
as the pod would, here, or answers as kubectl does for a pod that is gone or credentials that
are missing. What is tested is gputui's side: the argument lists it builds (no shell), the
bounds, the one-line reasons, and the merged verdict from each pod's real `gputui check`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from gputui.collect.source import demo_path, filter_gpus
from gputui.collect.trace.format import TraceWriter
from gputui.collect.trace.read import read_trace
from gputui.errors import GputuiError
from gputui.tools.fleet.kube import classify_exec, exec_argv, running_pods
from tests.conftest import free_port, run_cli

STANDIN = r"""#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
log = os.environ["KUBE_STANDIN_LOG"]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\n")
if os.environ.get("KUBE_STANDIN_AUTH") == "none":
    print("error: You must be logged in to the server (Unauthorized)", file=sys.stderr)
    sys.exit(1)
while args and args[0].startswith("--") and args[0] != "--":
    args = args[2:] if args[0] in ("--namespace", "--context") else args[1:]
if args[:2] == ["get", "pods"]:
    print(open(os.environ["KUBE_STANDIN_PODS"]).read())
    sys.exit(0)
if args[0] == "exec":
    pod = args[1]
    cmd = args[args.index("--") + 1:]
    if pod == "gone-0":
        print(f'Error from server (NotFound): pods "{{pod}}" not found', file=sys.stderr)
        sys.exit(1)
    if pod == "stuck-0":
        time.sleep(3600)
    sys.exit(subprocess.run(cmd).returncode)
print("error: unknown command", file=sys.stderr)
sys.exit(1)
"""


@pytest.fixture
def cluster(tmp_path):
    """A stand-in kubectl on PATH, pods listed from a file, and each pod's recording."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(STANDIN.format(python=sys.executable))
    kubectl.chmod(0o755)
    gputui = bin_dir / "gputui-in-pod"
    gputui.write_text(f'#!/bin/sh\nexec {sys.executable} -m gputui "$@"\n')
    gputui.chmod(0o755)
    pods = {
        "items": [
            {"metadata": {"name": "train-0"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "train-1"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "gone-0"}, "status": {"phase": "Running"}},
            {"metadata": {"name": "done-0"}, "status": {"phase": "Succeeded"}},
        ]
    }
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    snaps = read_trace(demo_path())
    for pod, gpus in (("train-0", {0}), ("train-1", {1})):
        w = TraceWriter(tmp_path / f"{pod}.jsonl")
        for s in snaps:
            if s.t - snaps[0].t <= 95.0:  # up to inside the demo's stall
                w.write(filter_gpus(s, frozenset(gpus)))
        w.close()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "KUBE_STANDIN_LOG": str(tmp_path / "kubectl.log"),
        "KUBE_STANDIN_PODS": str(tmp_path / "pods.json"),
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    return tmp_path, env, str(gputui)


def _calls(d: Path) -> list[list[str]]:
    return [json.loads(ln) for ln in (d / "kubectl.log").read_text().splitlines()]


def test_pods_chosen_by_selector_are_checked_and_merged_into_one_verdict(cluster):
    d, env, gputui = cluster
    r = run_cli(
        "fleet", "--launcher", "kubectl", "--selector", "app=train", "--namespace", "ml",
        "--remote-gputui", gputui, "--timeout", "60", "--json",
        "--", "check", "--replay", str(d / "{host}.jsonl"),
        env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["state"] == "stalled" and last["suspects"] == ["train-1:1"]
    assert last["silent_hosts"] == ["gone-0"]
    assert (
        'gputui: gone-0: silent (refused: Error from server (NotFound): pods "gone-0"' in r.stderr
    )
    calls = _calls(d)
    assert calls[0][-6:] == ["get", "pods", "--selector", "app=train", "--output", "json"]
    assert ["--namespace", "ml"] == calls[0][1:3]
    execs = sorted(c for c in calls if "exec" in c)
    assert [c[c.index("exec") + 1] for c in execs] == ["gone-0", "train-0", "train-1"]
    # the command reaches the pod as an argument list, {host} replaced by the pod's name
    train1 = next(c for c in execs if "train-1" in c)
    assert train1[train1.index("--") + 1 :][:4] == [
        gputui,
        "check",
        "--replay",
        str(d / "train-1.jsonl"),
    ]


def test_a_pod_that_never_answers_is_cut_at_its_bound(cluster):
    d, env, gputui = cluster
    start = time.monotonic()
    r = run_cli(
        "fleet", "--launcher", "kubectl", "train-0,stuck-0", "--remote-gputui", gputui,
        "--timeout", "8", "--json", "--", "check", "--replay", str(d / "{host}.jsonl"),
        env=env, timeout=120,
    )  # fmt: skip
    assert "gputui: stuck-0: silent (timeout: no result within 8 s)" in r.stderr
    assert time.monotonic() - start < 8 + 20


def test_missing_credentials_are_one_line_and_exit_2(cluster):
    d, env, gputui = cluster
    r = run_cli(
        "fleet", "--launcher", "kubectl", "--selector", "app=train", "--", "check",
        env={**env, "KUBE_STANDIN_AUTH": "none"}, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gputui: fleet: kubectl could not list the pods: error: You must be logged in to the "
        "server (Unauthorized)"
    ]


def test_kubectl_missing_is_one_line(cluster):
    d, env, gputui = cluster
    r = run_cli(
        "fleet", "--launcher", "kubectl", "--selector", "app=train", "--", "check",
        env={**env, "PATH": "/nonexistent"}, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cannot start kubectl" in r.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (["--selector", "a=b", "x", "--", "check"], "needs --launcher kubectl"),
        (["--launcher", "kubectl", "--selector", "a=b", "pod-a", "--", "check"], "not both"),
    ],
)
def test_bad_kubectl_arguments_are_one_line_and_exit_2(args, said):
    r = run_cli("fleet", *args, timeout=60)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr


def test_pod_listings_of_any_shape_give_running_pods_or_one_line():
    assert running_pods('{"items": []}') == []
    assert (
        running_pods(
            '{"items": [{"metadata": {"name": "-rf"}, "status": {"phase": "Running"}}, 7]}'
        )
        == []
    )
    for bad in ("", "[", "[" * 100_000, '{"items": 3}', "null"):
        with pytest.raises(GputuiError):
            running_pods(bad)


def test_exec_is_an_argument_list_and_kubectl_refusals_are_told_from_exit_1():
    assert exec_argv("p", ["gputui", "check"], namespace="ml", container="c") == [
        "kubectl", "--request-timeout=10s", "--namespace", "ml", "exec", "p",
        "--container", "c", "--", "gputui", "check",
    ]  # fmt: skip
    refused = classify_exec("p", "done", 1, "", "Error from server (Forbidden): nope", 0.1, 5)
    assert refused.outcome == "refused" and refused.error.startswith("Error from server")
    hang = classify_exec("p", "done", 1, '{"state": "stalled"}\n', "", 0.1, 5)
    assert hang.outcome == "done"  # gputui check's exit 1 is a hang, not a refusal
    prompt = classify_exec("p", "done", 1, "Please enter Username: ", "error: EOF\n", 0.1, 5)
    assert prompt.outcome == "refused" and prompt.error == "error: EOF"


# What kubectl 1.32 printed here with no cluster (its client-go log lines, then its own):
NO_CLUSTER = (
    'E1126 23:36:34.536780   13975 memcache.go:265] "Unhandled Error" err="couldn\'t get '
    'current server API group list: Get \\"http://localhost:8080/api?timeout=10s\\": dial tcp '
    '127.0.0.1:8080: connect: connection refused"\n'
    * 4
    + "The connection to the server localhost:8080 was refused - did you specify the right "
    "host or port?\n"
)


def test_no_cluster_is_kubectls_own_line_not_its_logs_nor_no_check_lines():
    run = classify_exec("p", "done", 1, "", NO_CLUSTER, 0.1, 5)
    assert run.outcome == "refused"
    assert run.error == (
        "The connection to the server localhost:8080 was refused - did you specify the right "
        "host or port?"
    )
    only_logs = classify_exec("p", "done", 1, "", NO_CLUSTER.splitlines()[0], 0.1, 5)
    assert only_logs.outcome == "refused" and only_logs.error.startswith("couldn't get current")
    assert "dial tcp 127.0.0.1:8080: connect: connection refused" in only_logs.error


def test_kubectls_reason_is_redacted():
    err = "Unable to connect to the server: https://admin:hunter2secret@10.0.0.1:6443\n"
    run = classify_exec("p", "done", 1, "", err, 0.1, 5)
    assert run.outcome == "refused" and "hunter2secret" not in run.error
    assert run.error.startswith("Unable to connect to the server: https://admin:")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_real_kubectl_with_no_cluster_says_why_the_pod_is_silent(tmp_path):
    """The real kubectl against an API server address where nothing listens: the pod is
    silent with kubectl's "connection ... refused", as an unreachable ssh host is."""
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{free_port()}'}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
    )
    r = run_cli(
        "fleet", "--launcher", "kubectl", "pod-a", "--", "check", "--duration", "1",
        env={"KUBECONFIG": str(config)}, timeout=90,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    silent = next(ln for ln in r.stderr.splitlines() if ln.startswith("gputui: pod-a: silent"))
    assert "refused" in silent and "connection" in silent.lower(), r.stderr
    assert "no check lines" not in r.stderr and "E11" not in r.stderr
