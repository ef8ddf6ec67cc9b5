"""`B`: probe the GPU the verdict blames, offered in the key bar only while it blames one.

Why a key of its own: once a verdict blames hardware (a hardware Xid, a link whose error
rate stands out, a slowed straggler, a sick GPU: gputui.diagnose.health.blame), the next step is
always the pair probe of that GPU against each peer. The key bar says so ("B probe GPU 3")
only then, so it is never noise. Why the refusal: while the job's ranks hold the GPUs, a
probe measures their traffic as much as the link; the way out (X, after the bundle) ends
them first, with their pids named and a confirmation. The result is shown on the probe
screen as the verdict's finding and handed to the Watcher as a `blamed_probe` record, so
`gputui record` keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputui.ui.keys import shown

if TYPE_CHECKING:
    from gputui.diagnose.health.blame import Blame
    from gputui.diagnose.merge.host_blame import HostBlame
    from gputui.ui.protocols import AppLike

PROBE_OPTIONS = ("backend", "cpu", "timeout", "size", "save_dir")


def blame_of(app: Any) -> Blame | None:
    """What the app's verdict blames now (None: no verdict, or no GPU blamed)."""
    from gputui.diagnose.health.blame import blamed

    v, snap = app.verdict, app.snapshot
    if v is None or snap is None:
        return None
    watcher = getattr(app, "watcher", None)
    health = getattr(watcher, "health_made", None)  # never made for this: the first frame
    sick: dict[int, str] = {}
    links: Any = ()
    if health is not None:
        sick = {h.gpu: f"GPU {h.gpu} is {h.word}: {h.reason}" for h in health.sick(snap.gpus)}
        links = health.links.findings()
    return blamed(v, sick, links)


def host_blame_of(app: Any) -> HostBlame | None:
    """The other host NCCL RAS blames during an alarm (a rank there dead or not answering,
    no last words of its own), with its neighbours from --probe-hosts; None otherwise.
    Asked with every drawn sample, and every sample brings a new Verdict object: worked out
    again only when what it reads changes (the findings, the host list), since asking this
    machine's addresses is a system call."""
    v = app.verdict
    if v is None or not getattr(v, "alarm", False):
        return None
    hosts = tuple((getattr(app, "probe_args", None) or {}).get("world_hosts") or ())
    key = (v.ranked, hosts)
    seen = getattr(app, "_host_blame", None)  # (key, its answer)
    if seen is None or seen[0] != key:
        from gputui.probe.world.blamed_host import ras_blamed_here

        seen = app._host_blame = (key, ras_blamed_here(v.ranked, hosts))
    return seen[1]


class BlamedProbeKey:
    """Mixin for GputuiApp: the `B` key and its offer in the key bar."""

    def _offer_blamed(self: AppLike) -> None:
        """Called with each drawn sample: the key bar offers B while a GPU is blamed."""
        key = shown("probe_blamed")
        b = blame_of(self)
        if b is not None:
            self.keybar.offer_first(((key, f"probe GPU {b.gpu}"),))
            return
        h = host_blame_of(self)
        self.keybar.offer_first(((key, f"probe host {h.host}"),) if h is not None else ())

    def action_probe_blamed(self: AppLike) -> None:
        from gputui.probe.blamed import holders, refusal, refused_record

        b = blame_of(self)
        snap = self.snapshot
        if b is None and (h := host_blame_of(self)) is not None:
            probe_host(self, h)
            return
        if b is None or snap is None:
            self.notify(
                f"{shown('probe_blamed')}: the verdict blames no GPU; {shown('probe')} probes "
                "every pair",
                timeout=5,
            )
            return
        if self.source.kind == "replay":
            self.notify(
                f"{shown('probe_blamed')}: the probe tests this machine's GPUs, not the recorded "
                "node's; on that "
                f"node run `gputui probe --pairs-with {b.gpu}`",
                timeout=8,
            )
            return
        held = holders(snap.processes, [g.index for g in snap.gpus])
        job = getattr(self.verdict, "job", None)
        watcher: Any = getattr(self, "watcher", None)
        if held:
            if watcher is not None:
                watcher.add_record(refused_record(b, held, job))
            self.notify(refusal(b, held), severity="warning", timeout=10)
            return
        try:
            from gputui.ui.screens.probe import ProbeScreen
        except ImportError as e:  # the probe module itself is missing from this build
            self.notify(f"probe unavailable: {e}", severity="error")
            return
        opts = {k: v for k, v in self.probe_args.items() if k in PROBE_OPTIONS}
        on_record = watcher.add_record if watcher is not None else None
        self.push_screen(ProbeScreen(**opts, blame=b, job=job, on_record=on_record))


def probe_host(app: AppLike, h: HostBlame) -> None:
    """The world probe's bisect over the host RAS blames and its neighbours. Its workers
    refuse any host whose GPUs a job still holds (this one too, while the job's ranks live):
    the screen then says so, naming them."""
    if app.source.kind == "replay":
        app.notify(
            f"{shown('probe_blamed')}: {h.host} is blamed ({h.why[:120]}); the probe reaches "
            "hosts from a live "
            f"node: run `{h.command_text()}` there",
            timeout=10,
        )
        return
    from gputui.ui.screens.world import open_world

    title = f"World probe of the blamed host {h.host} with {', '.join(h.neighbours) or '-'}"
    open_world(app, h.hosts, bisect=True, title=title)
