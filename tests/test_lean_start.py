"""The dashboard starts light: no OpenSSL mapped, one malloc arena, no sub-command imported.

Each check runs in a fresh interpreter (a subprocess), as a user's start does: what is already
imported in the test process would hide what an import costs. The dashboard itself runs in a
real terminal (tmux) against the stand-in libnvidia-ml.so.1 with 4 GPUs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nvml_standin.build import REPO, build_standin, standin_env
from tmux import Tmux, needs_tmux


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_inside_without_tls_ssl_does_not_import_and_afterwards_it_does():
    code = (
        "import sys\n"
        "from gputui.commands.lean import without_tls\n"
        "with without_tls():\n"
        "    import asyncio\n"
        "    try:\n"
        "        import ssl\n"
        "        print('ssl imported inside')\n"
        "    except ImportError:\n"
        "        print('no ssl inside')\n"
        "print('asyncio tls', asyncio.base_events.ssl is not None)\n"
        "import ssl\n"
        "print('ssl after', ssl.OPENSSL_VERSION.split()[0])\n"
    )
    r = python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["no ssl inside", "asyncio tls False", "ssl after OpenSSL"]


def test_without_tls_changes_nothing_once_asyncio_is_imported():
    code = (
        "import asyncio\n"
        "from gputui.commands.lean import without_tls\n"
        "with without_tls():\n"
        "    import ssl\n"
        "print(asyncio.base_events.ssl is ssl)\n"
    )
    r = python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION"), reason="mallopt is glibc's")
def test_glibc_takes_the_one_arena_setting():
    r = python("from gputui.commands.lean import one_malloc_arena; print(one_malloc_arena())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_the_dashboards_own_options_import_no_sub_command():
    """`gputui --version` goes through the dashboard's parser: no sub-command module is
    imported (python -X importtime lists every import on stderr)."""
    r = python(
        "from gputui.cli import main; main(['--interval', '2', '--version'])", "-X", "importtime"
    )
    assert "gputui" in r.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()}
    assert "gputui.commands.common" in imported  # the dashboard's options were built...
    assert not {"gputui.commands.check", "gputui.commands.record"} & imported  # ...alone


@pytest.mark.parametrize(
    "argv, alone",
    [
        ([], True),
        (["--interval", "1", "--no-mouse"], True),
        (["--replay=x.jsonl.gz"], True),
        (["--replay", "check"], True),  # a file named check: the value of --replay
        (["check"], False),
        (["--demo", "check"], False),
        (["--inter", "1"], False),  # an abbreviation: the whole parser reads it
        (["-h"], False),
        (["--help"], False),
        (["chek"], False),  # a typo: the whole parser names the commands
        (["--", "x"], False),
    ],
)
def test_only_the_dashboards_own_options_skip_the_sub_commands(argv, alone):
    from gputui.cli import _dashboard_only, build_parser

    assert _dashboard_only(build_parser(commands=False), argv) is alone


def test_a_typo_is_still_named_with_the_commands():
    r = python("from gputui.cli import main; raise SystemExit(main(['chek']))")
    assert r.returncode == 2
    assert "invalid choice: 'chek'" in r.stderr and "snapshot" in r.stderr


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


@needs_tmux
def test_the_dashboard_on_4_gpus_maps_no_openssl(nvml_lib):
    env = standin_env(nvml_lib, "ok")
    env["GPUTUI_STANDIN_GPUS"] = "4"
    keep = ("LD_LIBRARY_PATH", "GPUTUI_STANDIN_NVML", "GPUTUI_STANDIN_GPUS", "PYTHONPATH")
    t = Tmux(160, 50)
    try:
        t.start([sys.executable, "-m", "gputui"], {k: env[k] for k in keep if k in env})
        t.wait_for("GPU 0", "GPU 3", "q quit")
        pid = int(t._tmux("display", "-p", "-t", "t", "#{pane_pid}").stdout)
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "libnvidia-ml.so.1" in maps  # the dashboard's own map, on the stand-in
        assert "libssl" not in maps and "libcrypto" not in maps
        # One arena: no thread has a heap of its own, which glibc reserves as 64 MiB of
        # address space (mostly ---p) per arena.
        assert arenas(maps) == 0, maps
    finally:
        t.close()


def arenas(maps: str) -> int:
    """Anonymous reservations of 32 MiB or more with no access: glibc's per-thread heaps."""
    n = 0
    for line in maps.splitlines():
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if len(f) == 5 and f[1] == "---p" and hi - lo >= 32 << 20:
            n += 1
    return n
