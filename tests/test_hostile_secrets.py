"""Secrets in command lines and environments: a corpus that grows with every form we learn.

CORPUS is (argv, the secret, words that must stay readable). Each row is checked by
`redact_argv` directly, the tool rows again on real processes (a symlink named after the
tool runs Python, so /proc shows the tool's argv; `exec -a python` hides the tool's name
from argv, leaving only the executable's name), and every row through a recording that is
replayed (`snapshot --replay --json`) and bundled (`bundle --replay`).
To add a form: add a row.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from hostile_corpus import base_lines, text_of

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
