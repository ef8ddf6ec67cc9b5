"""Whose process is it: the Kubernetes pod, the container or the Slurm job, from its cgroup.

On a shared GPU node a rank is a pid and a command line; the person debugging thinks in pods
and Slurm jobs. Every container runtime and Slurm put a process in a cgroup whose path names
its owner, and /proc/PID/cgroup is readable without a daemon, so this is the one source that
works everywhere (no kubelet socket, no scontrol). The forms read here:

- Kubernetes, kubelet's cgroupfs driver: `/kubepods/<qos>/pod<UID>/<container id>` (the
  Guaranteed class has no `<qos>` segment);
- Kubernetes, systemd driver: `/kubepods.slice/kubepods-<qos>.slice/
  kubepods-<qos>-pod<UID with _ for ->.slice/cri-containerd-<id>.scope` (also `crio-<id>`,
  `docker-<id>.scope`);
- Docker: `/docker/<id>` (cgroupfs) or `/system.slice/docker-<id>.scope` (systemd);
- Slurm: `/slurm/uid_<U>/job_<J>/step_<S>/...` (cgroup v1) and
  `/system.slice/slurmstepd.scope/job_<J>/step_<S>/...` (cgroup v2), also `slurm_<node>/`.

Every line of the file is read (v1 controllers `N:ctrl:path`, v2's `0::path`); on a hybrid
host only some controllers' lines carry the owner's path, so the most specific match wins. A
line of unknown shape is ignored, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

MAX_CGROUP_BYTES = 16_384  # a cgroup file is a few hundred bytes; never read more than this

_HEX_ID = r"([0-9a-f]{12,64})"
_POD_CGROUPFS = re.compile(
    r"/kubepods(?:/(besteffort|burstable|guaranteed))?/pod([0-9a-fA-F-]{36})(?:/" + _HEX_ID + ")?"
)
_POD_SYSTEMD = re.compile(
    r"kubepods(?:-(besteffort|burstable|guaranteed))?-pod([0-9a-fA-F_]{36})\.slice"
    r"(?:/(?:cri-containerd|crio|docker|cri-o)-" + _HEX_ID + r"\.scope)?"
)
_DOCKER = re.compile(r"(?:^|/)docker[-/]" + _HEX_ID + r"(?:\.scope)?(?:/|$)")
_CRIO = re.compile(r"(?:^|/)crio-" + _HEX_ID + r"(?:\.scope)?(?:/|$)")
_CONTAINERD = re.compile(r"(?:^|/)cri-containerd-" + _HEX_ID + r"(?:\.scope)?(?:/|$)")
_SLURM = re.compile(
    r"/(?:slurm(?:_[^/]+)?/uid_(\d+)|slurmstepd\.scope)/job_(\d+)(?:/step_([^/]+))?"
)


@dataclass(frozen=True)
class Owner:
    """Who a process belongs to. `kind` is "pod", "docker", "container" or "slurm"."""

    kind: str
    pod_uid: str | None = None  # dashed form, as kubectl shows it
    qos: str | None = None
    container_id: str | None = None
    slurm_job: str | None = None
    slurm_step: str | None = None
    slurm_uid: int | None = None
    pod_name: str | None = None  # where known (the container's HOSTNAME, or the kubelet)
    namespace: str | None = None
    container: str | None = None  # the container's name, where the kubelet said it

    def short(self) -> str:
        """A few words for a table cell or a verdict: `pod train-7f9c-0`, `slurm 4242.0`."""
        if self.kind == "pod":
            name = self.pod_name or (self.pod_uid or "?")[:8]
            return f"pod {self.namespace + '/' if self.namespace else ''}{name}"
        if self.kind == "slurm":
            step = f".{self.slurm_step}" if self.slurm_step else ""
            return f"slurm {self.slurm_job}{step}"
        return f"{self.kind} {(self.container_id or '?')[:12]}"

    def to_json(self) -> dict[str, object]:
        d = {
            "kind": self.kind,
            "pod_uid": self.pod_uid,
            "pod": self.pod_name,
            "namespace": self.namespace,
            "container": self.container,
            "container_id": self.container_id,
            "slurm_job": self.slurm_job,
            "slurm_step": self.slurm_step,
        }
        return {k: v for k, v in d.items() if v is not None}


def _uid(raw: str) -> str:
    return raw.replace("_", "-").lower()


def owner_from_path(path: str) -> Owner | None:
    """The owner one cgroup path names, or None."""
    m = _POD_SYSTEMD.search(path)
    if m:
        return Owner(
            "pod", pod_uid=_uid(m.group(2)), qos=m.group(1) or "guaranteed", container_id=m.group(3)
        )
    m = _POD_CGROUPFS.search(path)
    if m:
        return Owner(
            "pod", pod_uid=_uid(m.group(2)), qos=m.group(1) or "guaranteed", container_id=m.group(3)
        )
    m = _SLURM.search(path)
    if m:
        uid = int(m.group(1)) if m.group(1) else None
        return Owner("slurm", slurm_job=m.group(2), slurm_step=m.group(3), slurm_uid=uid)
    for rx, kind in ((_DOCKER, "docker"), (_CONTAINERD, "container"), (_CRIO, "container")):
        m = rx.search(path)
        if m:
            return Owner(kind, container_id=m.group(1))
    return None


def _detail(o: Owner) -> int:
    """How much an owner says: a pod with its container beats a pod alone."""
    return sum(v is not None for v in (o.pod_uid, o.container_id, o.slurm_job, o.slurm_step))


def owner_from_cgroup(text: str) -> Owner | None:
    """The owner named by a /proc/PID/cgroup file's text: the most specific line wins."""
    best: Owner | None = None
    for line in text.splitlines()[:64]:
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        o = owner_from_path(parts[2])
        if o is not None and (best is None or _detail(o) > _detail(best)):
            best = o
    return best


def read_owner(pid: int, env: dict[str, str] | None = None) -> Owner | None:
    """The owner of a live process, or None (no owner, gone, or unreadable).

    Kubernetes sets a container's HOSTNAME to its pod's name (unless the pod uses the host's
    network), so the environment, when readable, names the pod without asking the kubelet.
    """
    try:
        with open(f"/proc/{pid}/cgroup", "rb") as f:
            text = f.read(MAX_CGROUP_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    o = owner_from_cgroup(text)
    if o is not None and o.kind == "pod" and env:
        name = env.get("HOSTNAME")
        ns = env.get("POD_NAMESPACE") or env.get("KUBERNETES_NAMESPACE")
        if name and _DNS_LABEL.fullmatch(name):
            o = replace(o, pod_name=name, namespace=ns)
    return o


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


_KINDS = frozenset({"pod", "docker", "container", "slurm"})


def owner_from_json(d: object) -> Owner | None:
    """An owner read back from a recording (untrusted): known keys, short strings, or None."""
    if not isinstance(d, dict) or d.get("kind") not in _KINDS:
        return None

    def short(key: str) -> str | None:
        v = d.get(key)
        return v[:128] if isinstance(v, str) and v.isprintable() else None

    return Owner(
        str(d["kind"]),
        pod_uid=short("pod_uid"),
        pod_name=short("pod"),
        namespace=short("namespace"),
        container=short("container"),
        container_id=short("container_id"),
        slurm_job=short("slurm_job"),
        slurm_step=short("slurm_step"),
    )
