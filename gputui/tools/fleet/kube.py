"""Reach pods: `kubectl exec POD -- gputui ...`, every pod bounded like an ssh host.

Where training runs in Kubernetes, the node is often not reachable by ssh but its pods are,
through kubectl. The pods come from `--selector`/`--namespace` (one bounded `kubectl get
pods`), or are named as the hosts. `kubectl exec` passes the command as an argument list to
the container (no remote shell), so nothing is quoted and `{host}` is replaced by the pod's
name. kubectl's own failures (no such pod, no credentials, an exec that is forbidden) and
the command's exit status share one channel: a run that printed nothing and whose stderr
starts like kubectl's errors, or that ended with kubectl's status 1 (remote gputui says
something on stdout whatever it finds), is a refusal, said in one line with kubectl's reason,
as ssh's is. kubectl's client-go logs (klog: `E1126 23:36:34.536780 13975 memcache.go:265]
...`) come before that line and are left out; the line is redacted (a server URL may carry
a token).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from gputui.collect import subproc
from gputui.errors import GputuiError
from gputui.redact import redact_text
from gputui.tools.fleet.run import HostRun, classify, left, not_started, remote_args, run_bounded

MAX_PODS = 4096
LIST_MAX_BYTES = 32 << 20
_KUBECTL_ERRORS = (
    "error:",
    "Error from server",
    "Unable to connect",
    "The connection to the server",
)
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")  # client-go's log lines


def kubectl_base(namespace: str | None, context: str | None = None) -> list[str]:
    argv = ["kubectl", "--request-timeout=10s"]
    if context:
        argv += ["--context", context]
    if namespace:
        argv += ["--namespace", namespace]
    return argv


def list_pods_argv(namespace: str | None, selector: str) -> list[str]:
    return [*kubectl_base(namespace), "get", "pods", "--selector", selector, "--output", "json"]


def running_pods(listing: str) -> list[str]:
    """Names of the Running pods in `kubectl get pods -o json` output; GputuiError (one
    line) for output that is not that."""
    try:
        doc = json.loads(listing)
    except (ValueError, RecursionError) as e:
        raise GputuiError(f"fleet: kubectl gave no pod list ({type(e).__name__})") from None
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise GputuiError("fleet: kubectl gave no pod list (no items)")
    out = []
    for it in items[:MAX_PODS]:
        meta = it.get("metadata") if isinstance(it, dict) else None
        status = it.get("status") if isinstance(it, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        phase = status.get("phase") if isinstance(status, dict) else None
        if isinstance(name, str) and name and not name.startswith("-") and phase == "Running":
            out.append(name)
    return out


def list_pods(namespace: str | None, selector: str, timeout: float) -> list[str]:
    """The Running pods that match the selector, or GputuiError saying why none could be had.

    Args:
        namespace: the pods' namespace; None: kubectl's default.
        selector: the label selector (`app=train`).
        timeout: seconds kubectl may take.

    Returns:
        The names of the Running pods, in kubectl's order.

    Raises:
        GputuiError: kubectl is missing, failed, or found no Running pod (exit 2).
    """
    outcome, rc, out, err, _ = subproc.run_bounded(
        list_pods_argv(namespace, selector),
        timeout=timeout,
        cancel=threading.Event(),
        max_stdout=LIST_MAX_BYTES,
    )
    if outcome == "timeout":
        raise GputuiError(f"fleet: kubectl did not list the pods within {timeout:g} s")
    if outcome != "done" or rc != 0:
        why = next((ln for ln in reversed(err.splitlines()) if ln.strip()), "") or outcome
        raise GputuiError(f"fleet: kubectl could not list the pods: {why.strip()[:300]}")
    pods = running_pods(out)
    if not pods:
        raise GputuiError(f"fleet: no Running pod matches --selector {selector!r}")
    return pods


def exec_argv(
    pod: str,
    remote: Sequence[str],
    *,
    namespace: str | None,
    container: str | None,
) -> list[str]:
    argv = [*kubectl_base(namespace), "exec", pod]
    if container:
        argv += ["--container", container]
    return [*argv, "--", *remote]


def classify_exec(
    pod: str, outcome: str, rc: int | None, out: str, err: str, secs: float, timeout: float
) -> HostRun:
    """As fleet.classify, with kubectl's refusals told from the command's exit status 1."""
    said = [ln.strip() for ln in err.splitlines() if ln.strip()]
    own = [ln for ln in said if not _KLOG.match(ln)]  # kubectl's words, not client-go's logs
    if outcome == "done" and rc not in (None, 0):
        first = own[0] if own else ""
        # kubectl's own error, whatever is on stdout (its "Please enter Username: " prompt),
        # or a status 1 with nothing on stdout (gputui always prints there)
        if first.startswith(_KUBECTL_ERRORS) or (rc == 1 and said and not out.strip()):
            why = own[-1] if own else _klog_message(said[-1])
            return HostRun(pod, "refused", rc, out, redact_text(why)[:300], secs)
    if outcome == "failed" and rc is None and "kubectl" in err:
        return HostRun(pod, "failed", rc, out, "kubectl is not installed here", secs)
    run = classify(pod, outcome, rc, out, "\n".join(own), secs, timeout)
    return replace(run, error=redact_text(run.error)) if run.error else run


def _klog_message(line: str) -> str:
    """The message of a client-go log line (its `err="..."` when it has one)."""
    m = re.search(r'err="((?:[^"\\]|\\.)*)"', line)
    return (m.group(1).replace('\\"', '"') if m else _KLOG.sub("", line)).strip()


def run_kubectl(
    pods: Sequence[str],
    remote_for: Sequence[str],
    *,
    namespace: str | None,
    container: str | None,
    fanout: int = 64,
    timeout: float = 60.0,
    cancel: threading.Event | None = None,
    deadline: float | None = None,
) -> list[HostRun]:
    """Run the gputui command in every pod, at most `fanout` at once, each bounded, all
    before `deadline` (monotonic; gputui.tools.fleet.run).

    Args:
        pods: the pods' names.
        remote_for: the gputui command line run in each (`{host}` is the pod's name).
        namespace: the pods' namespace; None: kubectl's default.
        container: the container to run in; None: the pod's default.
        fanout: how many pods are asked at once.
        timeout: seconds each pod may take.
        cancel: set to stop every run at once.
        deadline: a time.monotonic() by which every run ends; None: none but `timeout`.

    Returns:
        One HostRun per pod: its exit status, output and error.
    """
    cancel = cancel or threading.Event()

    def one(pod: str) -> HostRun:
        if cancel.is_set():
            return HostRun(pod, "cancelled", None, "", "cancelled", 0.0)
        limit = left(deadline, timeout)
        if limit <= 0:
            return not_started(pod, timeout)
        argv = exec_argv(
            pod, remote_args(remote_for, pod), namespace=namespace, container=container
        )
        return classify_exec(pod, *run_bounded(argv, limit, cancel), timeout=timeout)

    with ThreadPoolExecutor(max_workers=max(1, min(fanout, len(pods)))) as pool:
        return list(pool.map(one, pods))
