"""The dashboard's actions on processes: stacks, strace, dump-all, bundle and probe.

Kept apart from the app's layout and data flow. Every action acts on the process the user
selected, and only when that process can really be attached to: in a replay the pids are
those of the recording's node, and a pid that happens to exist here is someone else's
process, so the tools are refused with a message that says why.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.collect.model import Job, ProcessInfo
from gputui.ui.widgets.safe_text import Text

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from gputui.ui.protocols import AppLike
    from gputui.ui.screens.tool_pane import ToolPane

RECENT = 240  # snapshots kept for the incident bundle (4 min at the default 1 s)


class ProcessActions:
    """Mixin for GputuiApp: the tool keys. Panes run their tool in a thread worker.
    What it uses of the app is listed in gputui.ui.protocols.AppLike."""

    last_bundle: ToolPane | None = None  # the bundle pane of this session (for WayOut's X)

    def _live_target(self: AppLike, what: str) -> ProcessInfo | None:
        """The selected process, if a tool can be run on it here; otherwise say why."""
        if self.source.kind == "replay":
            self.notify(
                f"{what}: this is a replay; its processes ran on the recorded node, not here. "
                "Run gputui on a live node to attach to a worker.",
                severity="warning",
                timeout=6,
            )
            return None
        return self.selected_process()

    def action_py_spy(self: AppLike) -> None:
        from gputui.ui.actions.gone_rank import gone_suspects, gone_text
        from gputui.ui.screens.tool_pane import py_spy_pane

        replay = self.source.kind == "replay"
        if not self.table.chosen and gone_suspects(self.verdict):
            # the suspect is gone and the selected row is only the one left: not its stack
            from gputui.ui.screens.details import TextScreen

            self.push_screen(
                TextScreen("the suspect rank is gone", gone_text(self.verdict, replay))
            )
            return
        if replay and self._show_recorded_stack():
            return
        if (p := self._live_target("py-spy dump")) is not None:
            self.push_screen(py_spy_pane(p))

    def _show_recorded_stack(self: AppLike) -> bool:
        """In a replay, `p` shows the stack gputui recorded for the selected process at the
        stall (the recording's own dump), since the process itself is not here."""
        from gputui.ui.screens.details import TextScreen

        p = self.selected_process()
        entry = next(
            (e for e in getattr(self.verdict, "stacks", ()) if p and e.get("pid") == p.pid), None
        )
        if p is None or entry is None:
            return False
        text = Text()
        text.append("This is a replay: the stack below is the dump gputui recorded at the stall.\n")
        rank = entry.get("rank")
        text.append(f"rank {rank} · pid {p.pid} · GPU {entry.get('gpu')} · {entry.get('role')}\n\n")
        if entry.get("error"):
            text.append(f"{entry['outcome']}: {entry['error']}\n", style="bold")
        for frame in entry.get("stack") or ():
            text.append(f"    {frame}\n")
        self.push_screen(TextScreen(f"recorded py-spy dump of pid {p.pid}", text))
        return True

    def action_py_spy_native(self: AppLike) -> None:
        from gputui.ui.screens.tool_pane import py_spy_pane

        if (p := self._live_target("py-spy --native")) is not None:
            self.push_screen(py_spy_pane(p, native=True))

    def action_profile(self: AppLike) -> None:
        from gputui.ui.screens.tool_pane import profile_pane

        if (p := self._live_target("py-spy record")) is not None:
            self.push_screen(profile_pane(p))

    def action_gdb(self: AppLike) -> None:
        from gputui.ui.screens.tool_pane import gdb_pane

        if (p := self._live_target("gdb backtrace")) is not None:
            self.push_screen(gdb_pane(p))

    def action_core(self: AppLike) -> None:
        """gdb's backtrace of the core file a crashed rank left (its last words found it):
        the rank is gone, so there is no process to select."""
        from gputui.diagnose.gone.explain import crashed_cores
        from gputui.ui.screens.tool_pane import core_pane

        cores = crashed_cores(self.verdict)
        if not cores:
            self.notify(
                "core: no rank of the stalled job left a core file that gputui found (a core "
                "needs `ulimit -c` above 0 and a core_pattern that names a file)",
                severity="warning",
                timeout=6,
            )
            return
        rank, pid, path = cores[0]
        if not os.path.isfile(path):
            where = (
                " (this is a replay: it is on the recorded node)"
                if self.source.kind == "replay"
                else ""
            )
            self.notify(f"core: {path} is not here{where}", severity="warning", timeout=6)
            return
        self.push_screen(core_pane(path, f"rank {rank} (pid {pid})"))

    def action_strace(self: AppLike) -> None:
        from gputui.ui.screens.dialogs import ConfirmDialog
        from gputui.ui.screens.tool_pane import strace_pane

        p = self._live_target("strace")
        if p is None:
            return
        special = _special_process(p)
        if special is None:
            self.push_screen(strace_pane(p))
            return
        question = f"strace pid {p.pid}? It is {special}; tracing it slows the whole node."

        def answered(yes: bool | None) -> None:
            if yes:
                self.push_screen(strace_pane(p))

        self.push_screen(ConfirmDialog(question), answered)

    def action_kill(self: AppLike) -> None:
        """Send a signal to the selected process, after asking which (htop's `k`)."""
        from gputui.ui.screens.dialogs import KillDialog

        p = self._live_target("send a signal")
        if p is None:
            return

        def chosen(sig: signal.Signals | None) -> None:
            if sig is not None:
                message, severity = _send_signal(p, sig)
                self.notify(message, severity=severity)

        self.push_screen(KillDialog(p.pid, p.command), chosen)

    def action_environment(self: AppLike) -> None:
        """The selected process's environment, secrets redacted (a replay holds only the
        rank variables it recorded)."""
        from gputui.ui.screens.details import TextScreen

        p = self.selected_process()
        if p is None:
            return
        self.push_screen(TextScreen(f"environment of pid {p.pid}", _environment_text(p)))

    def _job_of(self: AppLike, p: ProcessInfo) -> Job:
        snap = self.snapshot
        for job in snap.jobs if snap else ():
            if p.pid in job.pids:
                return job
        return Job(key=f"pid:{p.pid}", label=f"pid {p.pid}", pids=(p.pid,), gpus=p.gpus)

    def action_dump_all(self: AppLike) -> None:
        from gputui.ui.screens.tool_pane import dump_all_pane

        if self.source.kind == "replay":
            self._show_recorded_stacks()
            return
        p = self._live_target("dump all ranks")
        if p is not None and self.snapshot is not None:
            self.push_screen(dump_all_pane(self._job_of(p), self.snapshot))

    def _show_recorded_stacks(self: AppLike) -> None:
        """In a replay, `a` shows every rank's stack that the recording holds at this
        moment (taken at the stall), identical ones grouped, the odd rank first."""
        from gputui.diagnose.hang.recorded_stacks import recorded_lines
        from gputui.ui.screens.details import TextScreen

        entries = list(getattr(self.verdict, "stacks", ()) or ())
        if not entries:
            self.notify(
                "all ranks: the recording holds no stacks at this moment (they are taken "
                "when a job stalls)",
                timeout=5,
            )
            return
        text = Text("This is a replay: the stacks gputui recorded at the stall.\n\n")
        for line in recorded_lines(entries):
            text.append(line + "\n", style="bold" if line.startswith("ODD") else "")
        self.push_screen(TextScreen("all ranks' recorded stacks, grouped", text))

    def action_bundle(self: AppLike) -> None:
        """b: say where the bundle of the moment on screen goes (the full path), and write
        it there on enter; esc writes nothing."""
        import socket

        from gputui.textsafe import clean
        from gputui.tools.bundle.write import default_bundle_dir
        from gputui.ui.screens.dialogs import WriteDialog
        from gputui.ui.screens.tool_pane import bundle_pane

        if not self.recent_snapshots:
            self.notify("no sample yet: nothing to bundle", timeout=3)
            return
        replay = self.source.kind == "replay"
        node = (getattr(self.source, "node", "") or "recording") if replay else None
        snaps = list(self.recent_snapshots)  # the moment on screen, whatever comes meanwhile
        host = snaps[-1].hostname or node or socket.gethostname()
        out = Path(self.bundle_dir or default_bundle_dir(host)).absolute()
        pane = bundle_pane(
            snaps,
            verdict=self.verdict,
            out_dir=out,
            settings=self.settings,
            # A replay's pids are not processes of this node: samples and verdict only.
            processes=[] if replay else None,
            recorded_node=node,
            made_from=(
                f"the recording {name}" if (name := getattr(self.source, "name", "")) else None
            )
            if replay
            else None,
            records=self.watcher.evidence_records(),  # so that its trace replays to it
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.last_bundle = pane  # the way out (X) needs the evidence saved first
                self.push_screen(pane)

        self.push_screen(
            # a recorded host name is part of the path: anyone's text
            WriteDialog(f"Write an incident bundle of this moment to\n{clean(str(out))}"),
            answered,
        )

    def action_probe(self: AppLike) -> None:
        if self.source.kind == "replay" and not self.probe_args:
            self.notify(
                "probe: it tests this machine's GPUs, not the recorded node's; run "
                "`gputui probe` on a GPU node",
                severity="warning",
                timeout=6,
            )
            return
        hosts = self.probe_args.get("world_hosts")
        if hosts:  # --probe-hosts: the whole world, not this node's pairs
            from gputui.ui.screens.world import open_world

            open_world(self, list(hosts))
            return
        try:
            from gputui.ui.screens.probe import ProbeScreen
        except ImportError as e:  # the probe module itself is missing from this build
            self.notify(f"probe unavailable: {e}", severity="error")
            return
        self.push_screen(ProbeScreen(**self.probe_args))


def _special_process(p: ProcessInfo) -> str | None:
    """Why tracing `p` deserves a question: init, or a kernel thread (no user space)."""
    if p.pid == 1:
        return "init (pid 1)"
    if p.pid == 2 or (p.ppid == 2 and not p.cmdline):
        return "a kernel thread"
    return None


def _send_signal(p: ProcessInfo, sig: signal.Signals) -> tuple[str, SeverityLevel]:
    """(message, severity) after sending `sig` to the process the user saw, never to a pid
    that has since been given to another process."""
    from gputui.tools.attach.ptrace import Target, preflight

    problem = preflight(Target.of(p))
    if problem is not None:
        return f"not sent: {problem[1]}", "warning"
    try:
        os.kill(p.pid, sig)
    except ProcessLookupError:
        return f"not sent: process {p.pid} has exited", "warning"
    except PermissionError:
        return (
            f"not sent: no permission to signal pid {p.pid} (owned by {p.user or '?'}; "
            "run gputui as that user or with sudo)",
            "error",
        )
    return f"sent {sig.name} to pid {p.pid}", "information"


def _environ_denied(pid: int) -> str:
    """Why /proc/PID/environ was refused, and what helps. Reading it is a ptrace check, so
    ptrace's own advice applies: "run as its user or with sudo" only where it is true (not to
    root, whom a container's missing CAP_SYS_PTRACE or another namespace refuses)."""
    from gputui.tools.attach.ptrace import permission_advice

    why = permission_advice(pid, "gputui").split("(ptrace refused): ", 1)[-1]
    return f"permission denied reading the environment of pid {pid}: {why}"


def _environment_text(p: ProcessInfo) -> Text:
    from gputui.redact import redact_env

    t = Text()
    if not p.live:
        t.append("From a recording: only the rank variables were recorded.\n\n", style="dim")
        r = p.rank
        env = {} if r is None else {k: str(v) for k, v in vars(r).items() if v is not None}
    else:
        import psutil

        from gputui.tools.attach.ptrace import Target, preflight

        problem = preflight(Target.of(p))
        if problem is not None:
            return t.append(problem[1])
        try:
            env = psutil.Process(p.pid).environ()
        except psutil.AccessDenied:
            return t.append(_environ_denied(p.pid))
        except psutil.Error as e:
            return t.append(f"cannot read the environment of pid {p.pid}: {type(e).__name__}")
    for k, v in sorted(redact_env(env).items()):
        t.append(k, style="bold").append(f"={v}\n")
    return t
