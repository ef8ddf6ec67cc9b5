"""GPU health as the text faces say it (`check`, `snapshot`, the bundle) and as JSON.

One place for the words, so every face says the same: "GPU 1: FAILED: Xid 79: GPU fell off
the bus", and each Xid with its number, GPU, pid and age. Kernel-log text is untrusted and
goes through textsafe.clean before it is shown.
"""

from __future__ import annotations

from typing import Any

from gputui.collect.nvml import xid as X
from gputui.diagnose.health.judge import HealthTracker
from gputui.diagnose.slow.clocks import hardware_slowdown
from gputui.textsafe import clean

MAX_XID_LINES = 8  # text faces show the newest; JSON has them all (bounded by the tracker)


def has_health(tracker: HealthTracker) -> bool:
    """Anything to say: counters were read, an Xid came, a GPU is lost, or a note."""
    links = tracker.links.reads or tracker.links.na
    return bool(tracker.counters or tracker.events or tracker.lost or tracker.notes or links)


def health_key(tracker: HealthTracker) -> tuple[Any, ...]:
    """What a change of prints a new `check --json` line: the words, the Xids seen, and the
    links named (not their rates, which change at every read).

    Cheap at every sample (`check` asks at every one): the words and the links named come
    from the tracker's caches (HealthTracker.words, LinkRates.findings), each kept until its
    version moves.

    Args:
        tracker: the run's HealthTracker.

    Returns:
        A tuple that compares equal while nothing `check` would print has changed.
    """
    words = tuple((i, h.word, h.reason) for i, h in tracker.words().items())
    named = tuple((f.gpu, f.link, f.kind) for f in tracker.links.findings())
    return (words, len(tracker.events), len(tracker.notes), named)


def health_line(tracker: HealthTracker, snap: Any) -> dict[str, Any]:
    """`{"health": {...}}` for a JSON line, or {} when nothing is known (an old recording).

    Args:
        tracker: the run's HealthTracker.
        snap: the latest sample.

    Returns:
        `{"health": {...}}` to merge into the JSON line, or {}.
    """
    if not has_health(tracker):
        return {}
    out = tracker.to_json(getattr(snap, "t", None))
    for g in getattr(snap, "gpus", ()):  # the hardware holding clocks down (a slow rank)
        row = out["gpus"].get(str(g.index))
        if row is not None and (slow := hardware_slowdown(g.events)):
            row["slowdown"] = slow
    return {"health": out}


def xid_text(tracker: HealthTracker, ev: X.XidEvent, now: float) -> str:
    i = X.info(ev.xid)
    who = f"GPU {ev.gpu}" if ev.gpu is not None else f"PCI {ev.pci or '?'}"
    if ev.pid:
        who += f", pid {ev.pid}" + (f" ({clean(ev.name, limit=32)})" if ev.name else "")
    return f"Xid {ev.xid} on {who}: {i.meaning} [{i.kind}] ({tracker.age(ev, now)}, {ev.source})"


def health_text(tracker: HealthTracker, snap: Any) -> list[str]:
    """Lines for a text face: the GPUs that are not ok, the newest Xids, what cannot be seen.

    Args:
        tracker: the run's HealthTracker.
        snap: the latest sample.

    Returns:
        Lines of text: the GPUs not ok (or that all are), links, clocks held down, Xids, notes.
    """
    if not has_health(tracker):
        return []
    now = getattr(snap, "t", 0.0) or 0.0
    out = []
    sick = tracker.sick(getattr(snap, "gpus", ()))
    for h in sick:
        out.append(f"health: GPU {h.gpu} {h.word.upper()}: {clean(h.reason, limit=300)}")
    if not sick and tracker.counters:
        out.append(f"health: {len(tracker.words())} GPU(s) ok (no hardware Xid, ECC or remap)")
    out += [f"health: {f.text}" for f in tracker.links.findings()]
    if boot := link_context(tracker):
        out.append(f"  {boot}")
    for g in getattr(snap, "gpus", ()):
        if slow := hardware_slowdown(g.events):
            out.append(f"  GPU {g.index} clocks held down by the hardware: {', '.join(slow)}")
    events = list(tracker.events)[-MAX_XID_LINES:]
    out += [f"  {clean(xid_text(tracker, e, now), limit=300)}" for e in events]
    out += [f"  note: {clean(n, limit=300)}" for n in tracker.notes]
    return out


def link_context(tracker: HealthTracker) -> str:
    """NVLink errors since boot, per GPU, said as context ("" before any read): healthy
    GPUs read thousands, so a total is never bad health; the rates are what count."""
    boot = {g: sum(tracker.links.since_boot(g).values()) for g in sorted(tracker.links.reads)}
    if not boot:
        return ""
    base = tracker.links.node_json()
    per = (base or {}).get("baseline_per_min", {})
    rate = f"; the node's links count {per['crc']:,.0f} CRC errors/min each" if "crc" in per else ""
    each = ", ".join(f"GPU {g} {n:,}" for g, n in boot.items())
    return f"NVLink errors since boot (context, not health): {each}{rate}"


def bundle_health(snapshots: Any) -> dict[str, Any] | None:
    """The bundle's health.json: what the samples' health records and lost GPUs say, at the
    last sample (None when they say nothing: an old recording).

    Args:
        snapshots: the bundle's samples, oldest first.

    Returns:
        The health.json object, or None when the samples carry no health record.
    """
    tracker = HealthTracker()
    last = None
    for s in snapshots:
        tracker.update(s)
        last = s
    if not has_health(tracker):
        return None
    return tracker.to_json(getattr(last, "t", None))
