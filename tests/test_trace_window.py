"""`snapshot --replay FILE [--at S]` reads the moment's window of history, not the whole file
(gputui.collect.trace.window), and must say what the whole replay says at that moment.

The real recordings of tests/data and the bundled demo are cut at many moments, with
windows far shorter than the snapshot's own (5 and 20 s, so the window is moved back to a
calm sample whenever a spin is in progress), and the verdict, the sample and its GPU health
are compared with those of the full replay. bench/day_recording.py times the day-long case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recorded_records import recordings

from gputui.collect.source import demo_path
from gputui.collect.trace.read import read_trace
from gputui.collect.trace.window import read_moment
from gputui.commands.moment import verdicts
from gputui.diagnose.hang.classify import GpuState, classify_gpu
from gputui.diagnose.health.judge import HealthTracker

DATA = Path(__file__).parent / "data"
FILES = [
    demo_path(),
    DATA / "h200x2-die-unseen.trace.jsonl.gz",
    DATA / "h100-shared-gpu-stuck.trace.jsonl.gz",
    DATA / "h200x4-straggler-4x.jsonl.gz",
    DATA / "h100-one-gpu" / "comm.trace.jsonl.gz",
]


def calm(snap) -> bool:
    return all(classify_gpu(g) != GpuState.SPINNING for g in snap.gpus)


def _said(v) -> tuple:
    return (v.state, v.reason, v.suspects, v.spinning, v.since, v.findings, v.stragglers)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("before_s", [70.0, 90.0])
def test_the_moments_verdict_is_the_whole_replays(path, before_s):
    full = read_trace(path)
    whole = verdicts(full)
    t0 = full[0].t
    span = full[-1].t - t0
    for at in [None, *(span * k / 12 for k in range(12))]:
        m = read_moment(path, at, before_s, calm)
        i = (
            len(full) - 1
            if at is None
            else next((j for j, s in enumerate(full) if s.t - t0 >= at), len(full) - 1)
        )
        assert m.snaps[-1].t == full[i].t and m.first_t == t0 and m.samples == len(full)
        assert m.snaps[-1].gpus == full[i].gpus and m.snaps[-1].jobs == full[i].jobs
        assert _said(verdicts(m.snaps)[-1]) == _said(whole[i]), (at, before_s)
        mine, theirs = HealthTracker(), HealthTracker()
        for s in m.snaps:
            mine.update(s)
        for s in full[: i + 1]:
            theirs.update(s)
        assert mine.words() == theirs.words()


def test_records_of_a_recording_with_every_type_reach_the_moment(tmp_path):
    """The die recording with its rendezvous, lastwords and error records: the moment at
    the end says what the full replay says (the lastwords finding included)."""
    path = tmp_path / "die.jsonl"
    path.write_text("\n".join(recordings()["die"]) + "\n")
    full = read_trace(path)
    m = read_moment(path, None, 5.0, calm)
    v = verdicts(m.snaps)[-1]
    assert _said(v) == _said(verdicts(full)[-1])
    assert any(f.source == "lastwords" for f in v.ranked), v.ranked


def test_a_spin_that_began_long_before_the_window_keeps_its_start():
    full = read_trace(demo_path())
    whole = verdicts(full)
    i = max(k for k, v in enumerate(whole) if v.alarm and v.since is not None)
    at = full[i].t - full[0].t
    m = read_moment(demo_path(), at, 1.0, calm)
    assert len(m.snaps) > 4  # moved back from a 1 s window to where the spin began
    assert verdicts(m.snaps)[-1].since == whole[i].since


# ---------------------------------------------------------------- the same words


@pytest.mark.hostile
@pytest.mark.parametrize(
    "util, dt, said",
    [
        (1.0, 0, "a second, different reading of GPU 0 at t={t:.3f} (the first is on line {n})"),
        (None, -10, "time goes backwards (t={t:.3f} after a sample at t={last:.3f})"),
    ],
    ids=["a different reading", "a clock gone back"],
)
def test_the_window_refuses_a_file_in_the_full_readers_words(tmp_path, util, dt, said):
    """`snapshot --replay` groups lines without parsing them (its index pass) by the full
    reader's rules (gputui.collect.trace.grouping), so a damaged file is refused in the
    words `check --replay` uses, line number and all (it said `on 12`, not `on line 12`)."""
    from gputui.errors import GputuiError

    lines = recordings()["comm"]  # one GPU: a sample is one line
    n = max(k for k, x in enumerate(lines) if x.startswith('{"t":')) + 1  # the last GPU line
    d = json.loads(lines[n - 1])
    last = d["t"]
    d.update(t=last + dt, util=util)
    lines.insert(n, json.dumps(d, separators=(",", ":")))  # line n + 1
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(GputuiError) as full:
        read_trace(path)
    with pytest.raises(GputuiError) as window:
        read_moment(path, None, 5.0, calm)
    assert str(full.value).endswith(
        f"r.jsonl:{n + 1}: "
        + said.format(t=d["t"], n=n, last=last)
        + ("; samples must be in time order" if dt else "")
    )
    assert str(window.value) == str(full.value)


# ---------------------------------------------------------------- the dashboard's replay


def _lazy_all(path, **kw):
    from gputui.collect.source import ReplaySource

    src = ReplaySource.from_file(path, realtime=False, lazy=True, **kw)
    got, errors = [], []
    while True:
        try:
            s = src.sample()
        except Exception as e:  # noqa: BLE001 - the one error the sampler would tell
            errors.append(e)
            continue
        if s is None:
            break
        got.append(s)
    return src, got, errors


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_replay_read_while_it_plays_plays_every_sample_of_the_whole_read(path):
    src, got, errors = _lazy_all(path)
    assert errors == [] and src.finished
    assert got == read_trace(path)


def test_a_damaged_line_found_while_playing_ends_the_replay_said_once(tmp_path):
    from gputui.errors import GputuiError

    lines = recordings()["comm"]
    bad = len(lines) - 5
    lines[bad] = '{"t": "late", "gpu": 0}'
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    src, got, errors = _lazy_all(path)
    assert len(errors) == 1 and isinstance(errors[0], GputuiError)
    assert f"r.jsonl:{bad + 1}: missing or non-numeric 't'" in str(errors[0])
    assert got and src.finished  # the samples before it were played


def test_a_real_time_replay_that_catches_up_with_the_reader_waits_for_the_next_sample(
    tmp_path, monkeypatch
):
    """The dashboard plays in real time while the file is still read: the delay after a
    sample is the time to the next one, so a player that has caught up with the reader waits
    for it (it raised IndexError past the end of the list read so far: bench/day_recording.py's
    first frame). The reader here holds back all but the first sample until the player asks."""
    import threading

    from gputui.collect.source import ReplaySource
    from gputui.collect.trace import read

    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"t": 1000.0 + 1.5 * k, "gpu": 0}) + "\n" for k in range(3)))
    whole = read_trace(path)
    asked, more = threading.Event(), threading.Event()

    class Asked(list):
        def __len__(self) -> int:
            asked.set()  # someone counts the samples read so far
            return super().__len__()

    class Held(read.TraceReader):
        def read(self, stop=None):
            self.snaps = Asked(whole[:1])
            more.wait(30)
            self.snaps.extend(whole[1:])
            return self.snaps

    monkeypatch.setattr(read, "TraceReader", Held)
    src = ReplaySource.from_file(path, realtime=True, lazy=True)
    asked.clear()
    played: list[object] = []
    player = threading.Thread(target=lambda: played.append(src.sample()))
    player.start()
    asked.wait(30)  # the player has caught up with the reader
    more.set()
    player.join(timeout=30)
    assert played == whole[:1] and src.next_delay() == 1.5
    assert [src.sample(), src.sample(), src.sample()] == [*whole[1:], None]


@pytest.mark.pilot
async def test_the_dashboard_says_a_damaged_line_found_while_playing_and_ends_the_replay(tmp_path):
    from screen import run_to_end

    from gputui.collect.source import ReplaySource
    from gputui.ui.app import GputuiApp

    lines = recordings()["comm"]
    lines[len(lines) - 5] = '{"t": "late", "gpu": 0}'
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    app = GputuiApp(ReplaySource.from_file(path, realtime=False, lazy=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await run_to_end(app, pilot)
        said = [n.message for n in app._notifications]
    assert any("missing or non-numeric 't'" in m for m in said), said
