"""Secrets in command lines and environments: a corpus that grows with every form we learn.

CORPUS is (argv, the secret, words that must stay readable). Each row is checked by
`redact_argv` directly, the tool rows again on real processes (a symlink named after the
tool runs Python, so /proc shows the tool's argv; `exec -a python` hides the tool's name
from argv, leaving only the executable's name), and every row through a recording that is
replayed (`snapshot --replay --json`) and bundled (`bundle --replay`).
To add a form: add a row.

Then the leaks issue 34 found, each over every path it could take: a tool known only by its
executable (`exec -a python redis-cli -a X`; its comm, or only its /proc/PID/exe when the
process renamed itself) through py-spy's `Process N: <command line>` header in `dump`,
`dump --json` and the bundle's stacks; a password that looks like an option
(`--password --dashX`) in `snapshot --json` and the bundle's processes.json; and secrets in
a recording's typed records (a health note, a stack dump's error, a rendezvous listener's
name, a rank's last words, a gatherer's error) in every face that reads a recording.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from hostile_corpus import T0, base_lines, text_of

from gputui.redact import REDACTED, redact_argv, redact_env

CORPUS: list[tuple[list[str], str, list[str]]] = [
    (["redis-cli", "-a", "s3cr3t-redis", "ping"], "s3cr3t-redis", ["ping"]),
    (["/usr/bin/redis-cli", "-h", "h", "-a", "s3cr3t-redis2"], "s3cr3t-redis2", ["-h", "h"]),
    (["sudo", "redis-cli", "-as3cr3t-glued"], "s3cr3t-glued", ["sudo"]),
    (["redis-cli", "--pass", "s3cr3t-pass"], "s3cr3t-pass", []),
    (["mysql", "-u", "root", "-pSECRETpw", "proddb"], "SECRETpw", ["root", "proddb"]),
    (["mysql", "-u", "root", "-pmypassword1", "proddb"], "mypassword1", ["proddb"]),
    (["mysql", "-u", "root", "-p", "sepSecret9"], "sepSecret9", ["root"]),
    (["mysqldump", "--password=dumpSecret", "db"], "dumpSecret", ["db"]),
    (["psql", "postgresql://app:pgSecret42@db:5432/x"], "pgSecret42", ["db:5432/x"]),
    (["psql", "host=db user=app password=kvSecret7"], "kvSecret7", []),
    (["app", "--password=eqSecret"], "eqSecret", []),
    (["app", "--api-key", "spSecret"], "spSecret", []),
    (["huggingface-cli", "login", "--token", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"], "hf_AbCd", []),
    (["gh", "auth", "ghp_0123456789abcdefghijABCDEFGHIJklmnop"], "ghp_0123", ["auth"]),
    (["curl", "-H", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def"], "eyJhbGci", []),
    (["curl", "-H", "Authorization: Basic dXNlcjpwYXNzd29yZA=="], "dXNlcjpw", []),
    (["curl", "-u", "alice:curlSecret", "https://x"], "curlSecret", ["https://x"]),
    (["aws", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"], "wJalrXUt", []),
    (["env", "AZURE_CLIENT_SECRET=azSecret1", "python", "t.py"], "azSecret1", ["t.py"]),
    (["gcloud", "--access-token-file=/run/t", "x"], "", ["/run/t"]),
    (["sshpass", "-p", "sshSecret", "ssh", "host"], "sshSecret", ["ssh", "host"]),
    (["htpasswd", "-b", "/etc/h", "bob", "htSecret"], "htSecret", ["bob", "/etc/h"]),
    (["openssl", "enc", "-aes256", "-k", "osslSecret"], "osslSecret", ["-aes256"]),
    (["smbclient", "-U", "bob%smbSecret", "//h/s"], "smbSecret", ["//h/s"]),
    (["ldapsearch", "-x", "-w", "ldapSecret", "-b", "dc=x"], "ldapSecret", ["dc=x"]),
    (["mosquitto_pub", "-P", "mqttSecret", "-t", "x"], "mqttSecret", ["-t"]),
    (["7z", "x", "-pzipSecret", "a.7z"], "zipSecret", ["a.7z"]),
    (["git", "clone", "https://u:gitSecret@github.com/o/r"], "gitSecret", ["github.com/o/r"]),
    (["gcc", "-pthread", "x.c"], "", ["-pthread", "x.c"]),  # not a password
    (["python", "train.py", "-a", "1"], "", ["-a", "1"]),  # -a means nothing outside a tool
]

CLOUD_ENV = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEXAMPLE",
    "AZURE_CLIENT_SECRET": "azSecret1",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON": '{"private_key": "x"}',
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
}


@pytest.mark.parametrize("argv, secret, kept", CORPUS, ids=lambda v: str(v)[:40])
def test_the_corpus_is_redacted_and_the_rest_stays_readable(argv, secret, kept):
    out = redact_argv(argv)
    joined = " ".join(out)
    if secret:
        assert secret not in joined and REDACTED in joined, out
    else:
        assert out == argv
    for word in kept:
        assert word in joined, out


def test_cloud_keys_in_an_environment_are_redacted():
    out = redact_env({**CLOUD_ENV, "PATH": "/usr/bin"})
    assert out["PATH"] == "/usr/bin"
    for name, value in CLOUD_ENV.items():
        assert value not in json.dumps(out), name


def test_the_executables_name_brings_its_tools_rules_when_argv_hides_it():
    """`exec -a python redis-cli -a X`: argv says python; /proc/PID/comm says redis-cli."""
    assert redact_argv(["python", "-a", "s3"], "redis-cli") == ["python", "-a", REDACTED]
    assert redact_argv(["python", "-a", "1"], "python3") == ["python", "-a", "1"]


SPIN = "print('ready', flush=True)\nwhile True:\n    pass\n"


@pytest.fixture
def tool_process(tmp_path) -> Iterator:
    """Start Python under a tool's name (a symlink), with argv[0] as given."""
    procs: list[subprocess.Popen] = []

    def start(tool: str, argv0: str, *args: str) -> subprocess.Popen:
        link = tmp_path / tool
        if not link.exists():
            link.symlink_to(sys.executable)
        p = subprocess.Popen(
            [argv0, "-c", SPIN, *args], executable=str(link), stdout=subprocess.PIPE
        )
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


@pytest.mark.parametrize(
    "tool, argv0, args, secret, kept",
    [
        ("redis-cli", "redis-cli", ("-a", "liveRedisSecret"), "liveRedisSecret", "-a"),
        ("redis-cli", "python", ("-a", "execASecret"), "execASecret", "-a"),  # exec -a python
        ("mysql", "mysql", ("-u", "root", "-pliveMy", "livedb"), "liveMy", "livedb"),
    ],
)
def test_a_live_tools_secret_is_redacted_in_snapshot(tool_process, tool, argv0, args, secret, kept):
    p = tool_process(tool, argv0, *args)
    r = run_cli("snapshot", "--json", "--interval", "0.3")
    assert secret not in r.stdout
    (me,) = [x for x in json.loads(r.stdout)["processes"] if x["pid"] == p.pid]
    assert REDACTED in " ".join(me["cmdline"]) and kept in me["cmdline"], me["cmdline"]


@pytest.fixture(scope="module")
def secret_recording(tmp_path_factory) -> Path:
    """A recording whose processes carry every corpus row as their command line, the
    first row as their parent, and the cloud keys in their environment."""
    lines = base_lines(samples=len(CORPUS))
    for k, x in enumerate(lines):
        p = x["procs"][0]
        p["cmdline"] = CORPUS[(k // 2) % len(CORPUS)][0]
        p["parent_cmd"] = " ".join(CORPUS[4][0])
        p["env"].update(CLOUD_ENV)
    path = tmp_path_factory.mktemp("rec") / "secrets.jsonl"
    path.write_text(text_of(lines))
    return path


def _secrets() -> list[str]:
    return [s for _, s, _ in CORPUS if s] + list(CLOUD_ENV.values())


def test_snapshot_replay_json_prints_no_recorded_secret(secret_recording):
    for at in ("0", "100"):
        r = run_cli("snapshot", "--replay", str(secret_recording), "--json", "--at", at)
        assert r.returncode == 0, r.stderr
        assert REDACTED in r.stdout
        leaked = [s for s in _secrets() if s in r.stdout]
        assert not leaked


def test_bundle_replay_copies_no_recorded_secret(secret_recording, tmp_path):
    out = tmp_path / "b"
    r = run_cli("bundle", "--replay", str(secret_recording), "--out", str(out))
    assert r.returncode == 0, r.stderr
    texts = []
    for f in out.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            texts.append((gzip.decompress(data) if f.suffix == ".gz" else data).decode())
    leaked = [s for s in _secrets() if any(s in t for t in texts)]
    assert not leaked


# ------------------------------------------------------------------ issue 34

RENAME = (
    "import ctypes\n"
    "ctypes.CDLL(None).prctl(15, b'python', 0, 0, 0)\n"  # PR_SET_NAME: comm is 'python' now
)


@pytest.fixture
def hidden_tool(tmp_path) -> Iterator:
    """Start Python as a tool it does not name in argv (argv[0] is `python`): known by its
    comm (a symlink named after the tool), or by its executable alone (a copy named after
    the tool, whose comm the process renames to `python`)."""
    procs: list[subprocess.Popen] = []

    def start(by: str, tool: str, *args: str) -> subprocess.Popen:
        exe = tmp_path / by / tool
        exe.parent.mkdir(exist_ok=True)
        script = tmp_path / by / "spin.py"  # a file: py-spy's header is one line
        if by == "comm":
            exe.symlink_to(sys.executable)
            script.write_text(SPIN)
        else:
            shutil.copy2(sys.executable, exe)
            script.write_text(RENAME + SPIN)
            if subprocess.run([exe, "-c", "pass"], capture_output=True).returncode:
                pytest.skip("this Python cannot run from a copy of its executable")
        p = subprocess.Popen(
            ["python", str(script), *args], executable=str(exe), stdout=subprocess.PIPE
        )
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def _files(d: Path) -> dict[str, str]:
    out = {}
    for f in sorted(d.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            out[str(f.relative_to(d))] = (
                gzip.decompress(data) if f.suffix == ".gz" else data
            ).decode("utf-8", "replace")
    return out


@pytest.mark.parametrize("by", ["comm", "exe"])
def test_a_tool_known_only_by_its_executable_is_redacted_in_dump_and_the_bundles_stacks(
    hidden_tool, tmp_path, by
):
    secret = f"execA{by}Secret77"
    p = hidden_tool(by, "redis-cli", "-a", secret, "ping")
    names = (
        Path(f"/proc/{p.pid}/comm").read_text().strip(),
        Path(f"/proc/{p.pid}/exe").resolve().name,
    )
    assert names[0] == ("redis-cli" if by == "comm" else "python"), names
    r = run_cli("dump", str(p.pid), timeout=120)
    assert r.returncode == 0, r.stderr
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("Process "))
    assert header.endswith(f"-a {REDACTED} ping") and secret not in r.stdout + r.stderr
    r = run_cli("dump", "--json", str(p.pid), timeout=120)
    assert r.returncode == 0 and secret not in r.stdout + r.stderr
    assert f"-a {REDACTED} ping" in json.loads(r.stdout)["results"][0]["lines"][0]
    out = tmp_path / "b"
    r = run_cli("bundle", "--pid", str(p.pid), "--out", str(out), "--seconds", "0", timeout=180)
    assert r.returncode == 0, r.stderr
    files = _files(out)
    assert not [f for f, text in files.items() if secret in text]
    assert f"-a {REDACTED} ping" in files[f"stacks/pid-{p.pid}.txt"]


def test_a_password_that_looks_like_an_option_is_redacted_in_snapshot_and_the_bundle(
    tool_process, tmp_path
):
    secret = "--dashPW33plantedZ"
    p = tool_process("python3", "python", "train.py", "--password", secret, "--epochs", "3")
    r = run_cli("snapshot", "--json", "--interval", "0.3")
    assert r.returncode == 0 and secret not in r.stdout
    (me,) = [x for x in json.loads(r.stdout)["processes"] if x["pid"] == p.pid]
    assert me["cmdline"][-4:] == ["--password", REDACTED, "--epochs", "3"]
    out = tmp_path / "b"
    r = run_cli("bundle", "--pid", str(p.pid), "--out", str(out), "--seconds", "0", timeout=180)
    assert r.returncode == 0, r.stderr
    files = _files(out)
    assert not [f for f, text in files.items() if secret in text]
    (rec,) = json.loads(files["processes.json"])
    assert rec["cmdline"][-4:] == ["--password", REDACTED, "--epochs", "3"]


RECORD_SECRETS = {
    "health note": "noteSecretQ7x",
    "stacks error": "stackErrSecretQ8",
    "stacks frame": "frameSecretQ9",
    "listener": "listenerSecretQ1",
    "last words": "tailSecretQ2x",
    "error record": "errRecSecretQ3",
    "nccl error": "ncclSecretQ4x",
}
RS = RECORD_SECRETS


def _recorded_records(t: float) -> list[dict]:
    key = "master:127.0.0.1:29500"
    return [
        {
            "type": "stacks",
            "t": t,
            "job": key,
            "trigger": "stalled",
            "tool": "py-spy",
            "ranks": [
                {
                    "pid": 815,
                    "rank": 0,
                    "gpu": 0,
                    "outcome": "done",
                    "thread": "active",
                    "frames": [["connect", f"postgres://u:{RS['stacks frame']}@db/x", 3]],
                },
                {
                    "pid": 816,
                    "rank": 1,
                    "gpu": 1,
                    "outcome": "failed",
                    "frames": [],
                    "error": f"py-spy: Process 816: redis-cli -a {RS['stacks error']} --password x",
                },
            ],
        },
        {
            "type": "health",
            "t": t + 0.1,
            "started": T0,
            "notes": [f"kernel log: sshpass -p {RS['health note']} ssh node2"],
        },
        {
            "type": "rendezvous",
            "t": t + 0.2,
            "jobs": [
                {
                    "job": key,
                    "world": 3,
                    "here": [{"pid": 815, "rank": 0}],
                    "missing_ranks": [2],
                    "missing_count": 1,
                    "since": T0,
                    "master_addr": "127.0.0.1",
                    "master_port": 29500,
                    "master_local": True,
                    "listeners": [
                        [77, "0.0.0.0:29500", f"redis-server --requirepass {RS['listener']}"]
                    ],
                }
            ],
        },
        {
            "type": "lastwords",
            "t": t + 0.3,
            "job": key,
            "trigger": "stalled",
            "ranks": [
                {
                    "pid": 816,
                    "rank": 1,
                    "gone": True,
                    "seen": True,
                    "gpus": [1],
                    "tail": f"Traceback ...\nValueError: token={RS['last words']}\n",
                }
            ],
        },
        {
            "type": "error",
            "t": t + 0.4,
            "job": key,
            "error": f"RuntimeError('DB_PASSWORD={RS['error record']}')",
        },
        {
            "type": "nccl",
            "t": t + 0.5,
            "job": key,
            "trigger": "stalled",
            "ras": {"error": f"connect to RAS failed: --api-key {RS['nccl error']}", "queries": []},
        },
    ]


@pytest.fixture(scope="module")
def recording_with_record_secrets(tmp_path_factory) -> Path:
    lines = base_lines(samples=80)
    recs = _recorded_records(T0 + 10.0)
    path = tmp_path_factory.mktemp("records") / "records.jsonl"
    path.write_text(text_of(lines[:80] + recs + lines[80:]))
    return path


def _record_leaks(text: str) -> list[str]:
    return [k for k, v in RECORD_SECRETS.items() if v in text]


@pytest.mark.parametrize(
    "args",
    [
        ("snapshot", "--json"),
        ("snapshot",),
        ("check", "--json"),
        ("check",),
    ],
    ids=" ".join,
)
def test_secrets_in_a_recordings_records_reach_no_face(recording_with_record_secrets, args):
    raw = recording_with_record_secrets.read_text()
    assert not [k for k, v in RECORD_SECRETS.items() if v not in raw]  # the control
    r = run_cli(*args, "--replay", str(recording_with_record_secrets))
    assert r.returncode in (0, 1, 2, 3), r.stderr
    assert not _record_leaks(r.stdout + r.stderr)
    assert REDACTED in r.stdout


def test_secrets_in_a_recordings_records_are_not_bundled(recording_with_record_secrets, tmp_path):
    out = tmp_path / "b"
    r = run_cli("bundle", "--replay", str(recording_with_record_secrets), "--out", str(out))
    # the records tell a rendezvous hang: the bundle exits with that verdict's code
    assert r.returncode == 1, r.stderr
    files = _files(out)
    assert any("rendezvous" in t for t in files.values())  # the records are in the bundle
    assert not {f: _record_leaks(t) for f, t in files.items() if _record_leaks(t)}


async def test_secrets_in_a_recordings_records_are_not_on_the_dashboard(
    recording_with_record_secrets,
):
    from screen import run_to_end, screen_text

    from gputui.collect.source import ReplaySource
    from gputui.collect.trace.format import read_trace
    from gputui.ui.app import GputuiApp

    source = ReplaySource(read_trace(recording_with_record_secrets), name="r", realtime=False)
    app = GputuiApp(source)
    seen: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await run_to_end(app, pilot)
        seen += screen_text(app)
        await pilot.press("d")  # the verdict's details: every finding, every stack entry
        await pilot.pause()
        seen += screen_text(app)
    assert any(REDACTED in ln for ln in seen)
    assert not _record_leaks("\n".join(seen))


def test_no_field_of_gputuis_own_records_is_secret_named():
    """recorded_record redacts a whole value under a secret-named key (`{"password": x}`):
    a field of gputui's own records so named would be blanked in every replay."""
    from escape_recording import lines as escape_lines

    from gputui.collect.source import demo_path
    from gputui.collect.trace.format import read_trace
    from gputui.redact import is_secret_name

    data = Path(__file__).resolve().parent / "data"
    records = [d for d in escape_lines(True) if "type" in d]
    records += _recorded_records(T0)
    for path in [demo_path(), *sorted(data.glob("*.jsonl.gz"))]:
        records += [r for s in read_trace(path) for r in s.records]
    keys: set[str] = set()

    def walk(v: object) -> None:
        if isinstance(v, dict):
            keys.update(k for k in v if isinstance(k, str))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(records)
    assert len(keys) > 50
    assert not sorted(k for k in keys if is_secret_name(k))
