"""Jobs from labels: a pod name without its replica suffix, a label the user names, or the
node.

Distributed jobs on Kubernetes name their pods after the job plus a replica part:
PyTorchJob `train-worker-3` and `train-master-0`, MPIJob `train-launcher` and
`train-worker-0`, a StatefulSet `train-2`, an indexed Job `train-3-x7k2q`, JobSet
`train-workers-0-3-abcde`. Stripping that part leaves the job's name; the namespace keeps two
teams' `train` apart.
"""

from __future__ import annotations

import re

from gputui.collect.prom.columns import History, Owner

# The replica part at the end of a pod name, outermost first: a random pod suffix (5 chars
# of [a-z0-9] after the indexed Job's or JobSet's numbers), then role-index, then a bare
# ordinal.
_RANDOM = re.compile(r"-\d+-[a-z0-9]{5}$")
_ROLE = re.compile(
    r"-(?:master|worker|workers|launcher|chief|ps|evaluator|replica|node|rank)(?:-\d+)*$"
)
_ORDINAL = re.compile(r"(?:-\d+)+$")


def job_name(pod: str) -> str:
    """`train-worker-3` -> `train`, `train-2` -> `train`; a name with no replica part stays."""
    name = pod
    if _RANDOM.search(name):
        name = _RANDOM.sub("", name)
    stripped = _ROLE.sub("", name)
    if stripped != name:
        return stripped or pod
    return _ORDINAL.sub("", name) or pod


def job_key(owner: Owner, by_label: bool) -> str | None:
    """The job an owner belongs to: the --job-label value, else namespace/pod-prefix.

    Args:
        owner: a GPU's owner at a step (its labels).
        by_label: whether `--job-label` names the job.

    Returns:
        The job's key, or None when the owner names no job.
    """
    if by_label:
        return owner.label
    if owner.pod:
        name = job_name(owner.pod)
        return f"{owner.namespace}/{name}" if owner.namespace else name
    return None


def owner_jobs(hist: History, by_label: bool) -> list[str | None]:
    """The job of each owner of the window (indexed like hist.owners)."""
    return [job_key(o, by_label) for o in hist.owners]


def one_job_per_node(hist: History, by_label: bool) -> bool:
    """No owner names a job anywhere in the window: every node's GPUs are one job.

    Args:
        hist: the window's columns.
        by_label: whether `--job-label` names the job.

    Returns:
        True when no owner names a job anywhere: each node is then judged as one job.
    """
    return not any(owner_jobs(hist, by_label))
