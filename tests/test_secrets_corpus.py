"""The planted-secrets test: 0 of the corpus in any output gputui has.

A real child (tests/targets/secrets_target.py) holds 59 unique secrets: in its environment
(names like SSHPASS, PW, CREDS; values holding JSON, connection strings, URLs whose password
has `@` and `/`, query-string tokens, key formats, a PEM key, a JWT, a random token), on its
command line (`-p X`, `-pX`, `--pw X`, `--passcode X`, `--creds X`, `--pwd X`,
`?a=1&token=X`, `{"api_key": "X"}`, `password:X`, `--password --dashX`, and keys known by
their shape alone as bare arguments: AWS, GitHub, Hugging Face, OpenAI), in the system
calls it keeps making
(strace: `write`, `sendto`, escaped bytes, `execve(["mysql", "-pX", "--password", "Y"])`)
and as string arguments of the C function it blocks in (gdb's backtrace).

Each output path is then scanned for every secret, and for the `plntNN` marker each one
carries (so half a secret counts as a leak too): the dashboard's screen in host mode,
`snapshot` and `snapshot --json`, a recording, `dump`, `dump --json`, `dump --gdb`, the strace
pane and the file it saves, and `bundle --pid`. The first tests show that the secrets are
really there for the tools to see (raw /proc, raw strace, raw gdb), so a clean output means
redaction, not absence; the others check that the redacted output still shows the place
where a secret was.
"""

from __future__ import annotations

import asyncio
import gzip
import html
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import run_cli
from targets import secrets_target as planted_corpus
from targets.secrets_target import (
    ARGV,
    ARGV_SECRETS,
    C_SOURCE,
    CORPUS,
    ENV,
    ENV_SECRETS,
    MEMORY_SECRETS,
    SYSCALL_SECRETS,
)
from textual.app import App

from gputui.collect.model import GpuSample, Snapshot
from gputui.collect.procs.reader import ProcessReader
from gputui.collect.trace.format import TraceWriter
from gputui.tools.attach import ptrace
from gputui.tools.attach.ptrace import Target
from gputui.tools.attach.stacks import gdb_command
from gputui.tools.attach.strace import strace_follow
from gputui.tools.which import find_tool

pytestmark = pytest.mark.skipif(
    not all(find_tool(t) for t in ("py-spy", "gdb", "strace")),
    reason="the planted-secrets test needs py-spy, gdb and strace",
)

TARGET_DIR = Path(planted_corpus.__file__).resolve().parent
_MARK = re.compile(r"(?i)plnt\d\d")
_MARKS = {m.lower(): label for label, s in CORPUS.items() for m in _MARK.findall(s)}


def leaks(text: str) -> list[str]:
    """Every planted secret found in `text`, whole or by its marker (half a secret leaks)."""
    found = {label: f"{label}: {secret}" for label, secret in CORPUS.items() if secret in text}
    for m in sorted({m.lower() for m in _MARK.findall(text)}):
        label = _MARKS.get(m, "?")
        if label not in found:
            line = next(ln for ln in text.splitlines() if m in ln.lower())
            found[label] = f"{label}: part of it ({m}) in ...{line.strip()[:160]}"
    return list(found.values())


def assert_clean(where: str, text: str) -> None:
    leaked = leaks(text)
    assert not leaked, (
        f"{len(leaked)} of {len(CORPUS)} planted secrets leaked into {where}:\n  "
        + "\n  ".join(leaked)
    )


def assert_all_present(where: str, text: str, secrets: dict[str, str]) -> None:
    missing = [f"{label}: {s}" for label, s in secrets.items() if s not in text]
    assert not missing, f"the control failed: not in the raw {where}:\n  " + "\n  ".join(missing)


# ------------------------------------------------------------------ the planted child


@pytest.fixture(scope="module")
def blocker_lib(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The C function the child blocks in, built with -g so gdb prints its arguments."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    d = tmp_path_factory.mktemp("blocker")
    (d / "blocker.c").write_text(C_SOURCE)
    lib = d / "libblocker.so"
    subprocess.run(
        [cc, "-g", "-O0", "-shared", "-fPIC", "-o", str(lib), str(d / "blocker.c")],
        check=True,
        timeout=120,
    )
    return lib


@pytest.fixture(scope="module")
def child(blocker_lib: Path | None) -> Iterator[subprocess.Popen[str]]:
    """The child, once it says it is ready (from inside the C function when there is one).

    Started as `python secrets_target.py -p X ...` from its own directory, so the first
    secrets are within the 80 characters that `snapshot` shows of a command.
    """
    argv = ["python", "secrets_target.py", *ARGV, "--lifetime", "400"]
    if blocker_lib is not None:
        argv += ["--lib", str(blocker_lib)]
    p = subprocess.Popen(
        argv,
        executable=sys.executable,
        cwd=TARGET_DIR,
        env={**os.environ, **ENV},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("ready "), f"the planted child did not start: {line!r}"
        yield p
    finally:
        p.kill()
        p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()


def raw_strace(pid: int, want: dict[str, str], limit_s: float = 30.0) -> str:
    """Unredacted `strace -f -p PID` until every wanted secret went by (or `limit_s`)."""
    strace = find_tool("strace")
    assert strace is not None
    proc = subprocess.Popen(
        [strace, "-f", "-tt", "-p", str(pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    text, deadline = b"", time.monotonic() + limit_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                continue
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                break
            text += chunk
            if all(s.encode() in text for s in want.values()):
                break
    # As the tools layer stops strace: SIGTERM (it detaches), reading on so it never blocks
    # on a full pipe; SIGKILL if it has not gone within 5 s (a detach can stall while a
    # traced vfork child execs, under load); then make sure the target was not left stopped.
    proc.terminate()
    try:
        text += proc.communicate(timeout=5)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        text += proc.communicate(timeout=30)[1]
    ptrace.settle(Target.of(pid), stopped_before=False, killed=True)
    return text.decode("utf-8", "replace")


def screen_text(svg: str) -> str:
    """The text of an exported screenshot: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


# ------------------------------------------------------------------ controls


def test_the_environment_and_command_line_secrets_are_really_in_the_child(child):
    cmdline = " ".join(psutil.Process(child.pid).cmdline())
    environ = "\n".join(f"{k}={v}" for k, v in psutil.Process(child.pid).environ().items())
    assert_all_present("command line", cmdline, ARGV_SECRETS)
    assert_all_present("environment", environ, ENV_SECRETS)
    assert len(CORPUS) >= 40 and len(set(CORPUS.values())) == len(CORPUS)


def test_raw_strace_and_gdb_see_the_syscall_and_memory_secrets(child, blocker_lib):
    assert_all_present("strace output", raw_strace(child.pid, SYSCALL_SECRETS), SYSCALL_SECRETS)
    if blocker_lib is None:
        pytest.skip("no C compiler: the memory secrets (gdb string arguments) are not planted")
    gdb = find_tool("gdb")
    assert gdb is not None
    r = subprocess.run([gdb, *gdb_command(child.pid)], capture_output=True, text=True, timeout=120)
    assert_all_present("gdb backtrace", r.stdout + r.stderr, MEMORY_SECRETS)


# ------------------------------------------------------------------ every output path


async def test_the_dashboard_screen_shows_the_child_but_none_of_its_secrets(child):
    from gputui.collect.live import LiveSource
    from gputui.ui.app import GputuiApp

    app = GputuiApp(LiveSource())
    async with app.run_test(size=(240, 50)) as pilot:
        await pilot.press("slash", *str(child.pid), "enter")
        deadline = time.monotonic() + 30
        text = screen_text(app.export_screenshot())
        while "--visible-marker" not in text:
            assert time.monotonic() < deadline, f"pid {child.pid} never showed:\n{text}"
            await pilot.pause(0.2)
            text = screen_text(app.export_screenshot())
    assert str(child.pid) in text
    assert_clean("the dashboard screen", text)
    assert "secrets_target.py --visible-marker epochs-3 -p <redacted> --pw <redacted>" in text


def _snapshot(*args: str, pid: int) -> tuple[str, str]:
    """stdout and stderr of `gputui snapshot ARGS` in host mode, listing the child.

    Host mode lists the 40 busiest processes, but a fresh process's first sample has no CPU
    figures yet and ranks by pid; after pid wraparound (a shared CI box) the child may then
    be missing. So: the CLI twice, and if the child is still not listed, the same reader
    and the same printing in-process, on a live source sampled until it ranks by CPU.
    """
    for _ in range(2):
        r = run_cli("snapshot", *args, timeout=120)
        assert r.returncode == 0, r.stderr
        if str(pid) in r.stdout:
            return r.stdout, r.stderr
    from gputui.collect.live import LiveSource
    from gputui.commands.snapshot import snapshot_to_json, snapshot_to_text

    src = LiveSource(interval=0.5)
    try:
        for _ in range(20):
            snap = src.sample()
            if snap.process(pid) is not None:
                if "--json" in args:
                    return json.dumps(snapshot_to_json(snap)), ""
                return snapshot_to_text(snap), ""
            time.sleep(src.next_delay())  # the sampling interval the CPU figures need
    finally:
        src.close()
    raise AssertionError(f"pid {pid} never listed by `gputui snapshot {' '.join(args)}`")


def test_snapshot_and_snapshot_json_hold_no_secret(child):
    out, err = _snapshot("--json", pid=child.pid)
    assert_clean("snapshot --json", out + err)
    (proc,) = [p for p in json.loads(out)["processes"] if p["pid"] == child.pid]
    assert proc["cmdline"][:4] == ["python", "secrets_target.py", "--visible-marker", "epochs-3"]
    assert "-p<redacted>" in proc["cmdline"] and "--lr" in proc["cmdline"]
    out, err = _snapshot(pid=child.pid)
    assert_clean("snapshot", out + err)
    assert "secrets_target.py --visible-marker epochs-3 -p <redacted>" in out


def test_a_recording_holds_no_secret(child, tmp_path):
    (proc,) = ProcessReader().read({child.pid: ((0,), 512.0)})
    snap = Snapshot(t=time.time(), gpus=(GpuSample(index=0, pids=(child.pid,)),), processes=(proc,))
    w = TraceWriter(tmp_path / "rec.jsonl.gz")
    w.write(snap)
    w.close()
    text = gzip.decompress((tmp_path / "rec.jsonl.gz").read_bytes()).decode()
    assert str(child.pid) in text and "--visible-marker" in text
    assert_clean("a recording", text)


def test_dump_and_dump_json_hold_no_secret(child):
    r = run_cli("dump", str(child.pid), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "main (secrets_target.py:" in r.stdout
    assert "--pw <redacted>" in r.stdout  # py-spy's header: the command line, redacted
    assert_clean("dump", r.stdout + r.stderr)
    r = run_cli("dump", "--json", str(child.pid), timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["outcome"] == "done"
    assert_clean("dump --json", r.stdout + r.stderr)


def test_dump_gdb_holds_no_secret(child, blocker_lib):
    if blocker_lib is None:
        pytest.skip("no C compiler: the memory secrets (gdb string arguments) are not planted")
    r = run_cli("dump", "--gdb", str(child.pid), timeout=180)
    assert r.returncode == 0, r.stderr
    assert_clean("dump --gdb", r.stdout + r.stderr)
    frame = next(ln for ln in r.stdout.splitlines() if "gputui_block_with (" in ln)
    assert re.search(r'password=0x[0-9a-f]+ "<redacted>"', frame), frame
    assert '"postgres://trainer:<redacted>@db.internal/runs"' in frame


class _PaneHost(App[None]):
    def __init__(self, pane: object) -> None:
        super().__init__()
        self.pane = pane

    def on_mount(self) -> None:
        self.push_screen(self.pane)  # type: ignore[arg-type]


async def test_the_strace_pane_and_the_file_it_saves_hold_no_secret(child, tmp_path):
    from gputui.ui.screens.tool_pane import ToolPane

    seen: set[str] = set()
    kinds = ("Authorization: Bearer", "sendto(", '"\\1\\2token=', "api_key: ", "execve(")

    def follow(on_line, cancel):
        def watch(line: str) -> None:  # stop once every kind of planted call went by
            seen.update(k for k in kinds if k in line)
            on_line(line)
            if len(seen) == len(kinds):
                cancel.set()

        return strace_follow(child.pid, seconds=60, on_line=watch, cancel=cancel)

    pane = ToolPane(f"strace pid {child.pid}", follow, save_dir=tmp_path)
    pane.notify = lambda *_a, **_k: None  # type: ignore[method-assign]
    async with _PaneHost(pane).run_test(size=(200, 40)) as pilot:
        await asyncio.to_thread(pane.finished.wait, 90)
        assert pane.finished.is_set(), "strace did not end"
        await pilot.pause(0.2)
        await pilot.press("s")
        await pilot.pause()
    assert seen == set(kinds), f"strace did not show every planted call: {sorted(seen)}"
    (saved,) = list(tmp_path.iterdir())
    text = saved.read_text()
    assert_clean("the strace pane's saved file", text)
    assert_clean("the strace pane", "\n".join(pane.lines))
    assert '"password=<redacted>"' in text and '"-p<redacted>", "--password", "<redacted>"' in text


def test_a_bundle_holds_no_secret(child, tmp_path):
    out = tmp_path / "bundle"
    r = run_cli("bundle", "--pid", str(child.pid), "--out", str(out), "--seconds", "0", timeout=180)
    assert r.returncode == 0, r.stderr
    assert_clean("bundle's output", r.stdout + r.stderr)
    for f in sorted(out.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            text = (gzip.decompress(data) if f.suffix == ".gz" else data).decode("utf-8", "replace")
            assert_clean(f"the bundle's {f.relative_to(out)}", text)
    (rec,) = json.loads((out / "processes.json").read_text())
    env = rec["environ"]
    assert env["SSHPASS"] == env["PW"] == env["CREDS"] == "<redacted>"
    assert env["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1" and env["MASTER_PORT"] == "29517"
    assert env["DATABASE_URL"] == "postgres://trainer:<redacted>@db.internal:5432/runs"
    assert "main (secrets_target.py:" in (out / f"stacks/pid-{child.pid}.txt").read_text()
