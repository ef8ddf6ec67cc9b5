"""The way out of a hang, after the evidence: `X` ends every rank of the stuck job on this node.

Why a key: a hung NCCL job holds its GPUs until its timeout (10 minutes by default, or
forever); once the incident bundle is written, ending the ranks is what lets the scheduler
restart the job. Why the guards: never before the evidence is saved (the bundle pane of this
session must have finished), never without a confirmation that names the pids, never a
process that is not a rank of that job (gputui.tools.attach.endjob checks each again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputui.collect.model import Job, Snapshot
from gputui.ui.keys import shown

if TYPE_CHECKING:
    from gputui.ui.protocols import AppLike


def stuck_job(verdict: Any, snap: Snapshot) -> Job | None:
    """The job the alarm is about: the one on the spinning GPUs (its label first)."""
    if verdict is None or not verdict.alarm:
        return None
    gpus = set(verdict.spinning) | set(verdict.suspects)
    on = [j for j in snap.jobs if gpus & set(j.gpus)]
    return next((j for j in on if j.label == verdict.job), on[0] if on else None)


class WayOut:
    """Mixin for GputuiApp: the `X` key."""

    def action_end_job(self: AppLike) -> None:
        from gputui.tools.attach.endjob import GRACE_S, end_ranks, ranks_here
        from gputui.ui.screens.dialogs import ConfirmDialog
        from gputui.ui.screens.tool_pane import ToolPane

        snap = self.snapshot
        if self.source.kind == "replay" or snap is None:
            self.notify("end the job: this is a replay; its ranks are not here", timeout=5)
            return
        job = stuck_job(self.verdict, snap)
        if job is None:
            self.notify("end the job: no job is stalled", timeout=4)
            return
        pane = self.last_bundle
        if pane is None or not pane.finished.is_set() or not getattr(pane.result, "ok", False):
            self.notify(
                f"end the job: write the incident bundle first ({shown('bundle')}); the evidence "
                "goes before "
                "the way out",
                severity="warning",
                timeout=6,
            )
            return
        ranks = ranks_here(job, snap.processes)
        if not ranks:
            self.notify(f"end the job: no rank of {job.label} runs on this node", timeout=5)
            return
        pids = ", ".join(str(p.pid) for p in ranks)
        question = (
            f"End {job.label}: its {len(ranks)} rank(s) on this node, pids {pids}?\n"
            f"SIGTERM now, SIGKILL after {GRACE_S:g} s, so the scheduler can restart it."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.push_screen(
                    ToolPane(
                        f"ending {job.label}",
                        lambda on_line, cancel: end_ranks(
                            job, ranks, on_line=on_line, cancel=cancel
                        ),
                    )
                )

        self.push_screen(ConfirmDialog(question), answered)
