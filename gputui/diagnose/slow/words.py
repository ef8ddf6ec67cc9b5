"""A slow job in words: the straggler's sentence, rank lists as a person writes them, and the
JSON of a job's wait shares. The rule that finds stragglers is gputui.diagnose.slow.straggler;
every face (the banner, `check`, `snapshot`, the exporter, `merge`) says it through these.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.diagnose.slow.straggler import Straggle


def spans(ix: Iterable[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5": how a person writes a list of ranks."""
    out: list[str] = []
    xs = sorted(set(ix))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(
            str(xs[i]) if j == i else f"{xs[i]}-{xs[j]}" if j > i + 1 else f"{xs[i]}, {xs[j]}"
        )
        i = j + 1
    return ", ".join(out)


def who(s: Straggle, gpus: Iterable[int]) -> str:
    """ "rank 0 (GPU 0)", "ranks 1-3 (GPUs 1-3)" or, when ranks are unknown, "GPUs 1-3"."""
    gpus = sorted(gpus)
    where = ("GPU " if len(gpus) == 1 else "GPUs ") + spans(gpus)
    if all(i in s.ranks for i in gpus):
        ranks = [s.ranks[i] for i in gpus]
        return ("rank " if len(ranks) == 1 else "ranks ") + spans(ranks) + f" ({where})"
    return where


def headline(s: Straggle) -> str:
    """The one sentence of a slow job, or of one whose ranks all wait alike."""
    job = f"job {s.label}: " if s.label else ""
    if s.slow:
        waiting = sum(s.shares[i] for i in s.waiters) / len(s.waiters)
        own = ", ".join(f"{s.shares[i]:.0%}" for i in s.stragglers)
        verb = "is the straggler" if len(s.stragglers) == 1 else "are the stragglers"
        wait, their = ("waits", "its") if len(s.waiters) == 1 else ("wait", "their")
        return (
            f"{job}slow: {who(s, s.stragglers)} {verb}; {who(s, s.waiters)} {wait} for it in "
            f"{waiting:.0%} of {their} samples ({own} for the straggler, over {s.window_s:.0f} s)"
        )
    if s.alike:
        mean = sum(s.shares.values()) / len(s.shares)
        return (
            f"{job}all ranks wait alike ({mean:.0%} of each step): the bottleneck is outside "
            "the GPUs (input pipeline, host CPU, network), not a straggler"
        )
    return ""


def job_words(s: Straggle) -> str:
    """The wait shares of a job's GPUs on one line: `wait GPU 0 0%, GPU 1 98%; slow: ...`."""
    shares = ", ".join(f"GPU {i} {x:.0%}" for i, x in sorted(s.shares.items()))
    said = headline(s)
    return f"wait {shares}" + (f"; {said.split(': ', 1)[1] if s.label else said}" if said else "")


def straggle_to_json(s: Straggle) -> dict[str, object]:
    return {
        "job_key": s.key,
        "wait_share": {str(i): round(x, 3) for i, x in sorted(s.shares.items())},
        "stragglers": list(s.stragglers),
        "alike": s.alike,
    }
