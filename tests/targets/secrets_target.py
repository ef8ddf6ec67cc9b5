"""A process full of planted secrets, for tests/test_secrets_corpus.py.

The corpus lives here so the test and the target agree on it. Every secret is unique and
easy to grep (it carries a `PLNT`/`plnt` marker and a fixed random tail) and has the shape
it would have in real life (a GitHub token is `ghp_` + 36, a JWT has three parts...).
Where the secret sits:

- env: the test starts this process with ENV (names and values of every kind);
- argv: the test passes ARGV (every spelling of a secret option, URLs, JSON);
- syscalls: a worker thread writes SYSCALL_WRITES to /dev/null and a datagram socket and
  starts EXEC_ARGV (`mysql -pX --password Y`) every few hundred ms, so `strace -f` sees them
  (strace shows 32 bytes of a buffer: each secret ends within them);
- memory: the main thread blocks inside a C function (built by the test with -g) that
  takes MEMORY strings as arguments, so gdb's backtrace prints them.

It prints `ready <pid>` once all of that runs (from inside the C function when there is
one), and exits by itself after --lifetime s.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import socket
import subprocess
import threading
import time

# A fixed, random-looking tail per secret: the corpus is the same on every run.
_TAILS = (
    "Xk9mQ2vL7rT4wZ8b",
    "aP3nR6tY1uI5oE2w",
    "Zc7Vb4Nm1Qw8Er5T",
    "gH2jK5lM8nB3vC6x",
    "Yt6Re3Wq9Az2Sx5D",
    "mN4bV7cX1zL8kJ5h",
    "Qe8Rt2Yu6Io4Pa9S",
    "dF5gH8jK2lZ6xC3v",
)


def _s(n: int, length: int = 20) -> str:
    """Secret number n: `plnt` + two digits + a random-looking tail, `length` long."""
    return (f"plnt{n:02d}" + _TAILS[n % len(_TAILS)] * 4)[:length]


def _alnum(n: int, length: int) -> str:
    return (f"PLNT{n:02d}" + _TAILS[n % len(_TAILS)] * 8)[:length]


# ------------------------------------------------------------------ environment (name: secret)
AWS_ID = "AKIA" + _alnum(25, 16).upper()
AWS_SECRET = (_alnum(26, 18) + "/" + _alnum(27, 21))[:40]
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _alnum(28, 32)
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ" + _alnum(29, 12) + "." + _alnum(30, 24)

ENV_SECRETS: dict[str, str] = {
    "SSHPASS": _s(1),
    "PW": _s(2),
    "DB_PW": _s(3),
    "PASSCODE": _s(4),
    "CREDS": _s(5),
    "HF_TOKEN": "hf_" + _alnum(6, 34),
    "WANDB_API_KEY": "9f8e7d6c5b4a" + "0123456789abcdef0123456789ab",  # 40 hex: name only
    "json-password": _s(8),
    "json-api-key": _s(9),
    "url-at-slash": "p@ss/" + _s(10, 14),
    "conn-password": _s(11),
    "azure-account-key": _alnum(12, 40) + "==",
    "amz-credential": _alnum(13, 20),
    "amz-signature": "a1b2c3d4e5f6" * 5 + "a1b2",  # 64 hex
    "query-token": _s(14),
    "redis-password": _s(15),
    "mongo-password": _s(16),
    "google-key": "AIza" + _alnum(17, 35),
    "stripe": "sk_live_" + _alnum(18, 24),
    "slack-app": "xapp-1-A0" + _alnum(19, 20),
    "npm": "npm_" + _alnum(20, 36),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + _alnum(21, 50),
    "gitlab": "glpat-" + _alnum(22, 20),
    "github-fine": "github_pat_11A" + _alnum(23, 40),
    "anthropic": "sk-ant-api03-" + _alnum(24, 40),
    "AWS_ACCESS_KEY_ID": AWS_ID,
    "aws-secret-beside-id": AWS_SECRET,
    "pem": PEM_BODY,
    "jwt": JWT,
    "random-blob": _alnum(31, 24).replace("PLNT", "pLnT"),
}
E = ENV_SECRETS
ENV: dict[str, str] = {
    "SSHPASS": E["SSHPASS"],
    "PW": E["PW"],
    "DB_PW": E["DB_PW"],
    "PASSCODE": E["PASSCODE"],
    "CREDS": E["CREDS"],
    "HF_TOKEN": E["HF_TOKEN"],
    "WANDB_API_KEY": E["WANDB_API_KEY"],
    "APP_CONFIG": (
        f'{{"db": {{"host": "db1", "password": "{E["json-password"]}"}},'
        f' "api_key": "{E["json-api-key"]}", "retries": 3}}'
    ),
    "DATABASE_URL": f"postgres://trainer:{E['url-at-slash']}@db.internal:5432/runs",
    "SQLSERVER": f"Server=tcp:db1,1433;User ID=u;Password={E['conn-password']};Encrypt=true",
    "AZURE_STORAGE": (
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        f"AccountKey={E['azure-account-key']};EndpointSuffix=core.windows.net"
    ),
    "MODEL_URL": (
        "https://bucket.s3.amazonaws.com/m.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={E['amz-credential']}&X-Amz-Signature={E['amz-signature']}"
    ),
    "FEED": f"https://feed.example.com/x?user=me&token={E['query-token']}",
    "REDIS_URL": f"redis://:{E['redis-password']}@cache:6379/0",
    "MONGO_URI": f"mongodb+srv://app:{E['mongo-password']}@cluster0.example.net/db?w=majority",
    "MAPS": f"key in use: {E['google-key']}",
    "BILLING": E["stripe"],
    "SLACK_APP": E["slack-app"],
    "NPM_CONFIG": f"//registry.npmjs.org/:_authToken={E['npm']}",
    "PYPI_UPLOAD": E["pypi"],
    "GITLAB": E["gitlab"],
    "GH_FINE": E["github-fine"],
    "CLAUDE": E["anthropic"],
    "AWS_ACCESS_KEY_ID": AWS_ID,
    "AWS_PAIR": f"{AWS_ID} {AWS_SECRET}",
    "SIGNING": f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\n",
    "UPSTREAM": JWT,
    "BLOB": E["random-blob"],
    # Harmless settings that must stay readable.
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
    "NCCL_DEBUG": "INFO",
    "MASTER_PORT": "29517",
}

# ------------------------------------------------------------------ argv (label: secret)
ARGV_SECRETS: dict[str, str] = {
    "-p X": _s(40),
    "--pw X": _s(41),
    "--passcode X": _s(42),
    "--creds X": _s(43),
    "--pwd X": _s(44),
    "-pX": _s(45),
    "?a=1&token=X": _s(46),
    "json argument": _s(47),
    "password:X": _s(48),
    "--api-key=X": _s(49),
    "url password": _s(50),
    "PASS=X": _s(51),
    "-u user:X": _s(52),
    # by their shape alone, as bare arguments (issue 34: an AWS key id leaked so)
    "bare AWS key id": "AKIA" + _alnum(53, 16).upper(),
    "bare GitHub token": "ghp_" + _alnum(54, 36),
    "bare Hugging Face token": "hf_" + _alnum(55, 34),
    "bare OpenAI key": "sk-proj-" + _alnum(56, 48),
    # a value that looks like an option, after a secret option (issue 34)
    "--password --dashX": "--" + _s(57, 18),
}
A = ARGV_SECRETS
ARGV: list[str] = [
    "--visible-marker",
    "epochs-3",
    "-p",
    A["-p X"],
    "--pw",
    A["--pw X"],
    "--passcode",
    A["--passcode X"],
    "--creds",
    A["--creds X"],
    "--pwd",
    A["--pwd X"],
    "-p" + A["-pX"],
    "--url",
    f"https://api.example.com/v1?a=1&token={A['?a=1&token=X']}",
    f'{{"api_key": "{A["json argument"]}"}}',
    f"password:{A['password:X']}",
    f"--api-key={A['--api-key=X']}",
    "--db",
    f"postgres://u:{A['url password']}@db.internal/runs",
    f"PASS={A['PASS=X']}",
    "-u",
    f"alice:{A['-u user:X']}",
    A["bare AWS key id"],
    A["bare GitHub token"],
    A["bare Hugging Face token"],
    A["bare OpenAI key"],
    "--password",
    A["--password --dashX"],
    "--lr",
    "0.1",
]

# ------------------------------------------------------------------ system calls
SYSCALL_SECRETS: dict[str, str] = {
    "write Authorization: Bearer": _s(60, 10),
    "sendto password=": _s(61, 22),
    "write escaped token=": _s(62, 20),
    "write api_key: ": _s(63, 20),
    "execve -pX": _s(64, 20),
    "execve --password X": _s(65, 20),
}
S = SYSCALL_SECRETS
SYSCALL_WRITES: list[bytes] = [
    b"Authorization: Bearer " + S["write Authorization: Bearer"].encode(),
    b"password=" + S["sendto password="].encode(),
    b"\x01\x02token=" + S["write escaped token="].encode() + b"\x7f",
    b"api_key: " + S["write api_key: "].encode(),
]
EXEC_ARGV = ["mysql", "-p" + S["execve -pX"], "--password", S["execve --password X"]]

# ------------------------------------------------------------------ memory (gdb)
MEMORY_SECRETS: dict[str, str] = {
    "url=": _s(70),
    "password=": _s(71),
    "api_key=": _s(72),
    "header=": _s(73),
    "blob=": _s(74),
}
M = MEMORY_SECRETS
MEMORY_ARGS: list[str] = [
    f"postgres://trainer:{M['url=']}@db.internal/runs",
    M["password="],
    M["api_key="],
    f"Authorization: Bearer {M['header=']}",
    f'{{"token": "{M["blob="]}"}}',
]
C_SOURCE = r"""
#include <poll.h>
#include <stdio.h>
#include <unistd.h>
/* Says it is ready, then blocks while its arguments sit in its frame, where gdb's backtrace
   prints them. */
int gputui_block_with(const char *url, const char *password, const char *api_key,
                      const char *header, const char *blob, int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    return poll(&p, 1, timeout_ms);
}
"""

CORPUS: dict[str, str] = {
    **{f"env {k}": v for k, v in ENV_SECRETS.items()},
    **{f"argv {k}": v for k, v in ARGV_SECRETS.items()},
    **{f"syscall {k}": v for k, v in SYSCALL_SECRETS.items()},
    **{f"memory {k}": v for k, v in MEMORY_SECRETS.items()},
}


def _syscalls(stop: threading.Event, interval: float) -> None:
    """Write every syscall secret again and again, so a tracer that attaches later sees it."""
    sink = os.open(os.devnull, os.O_WRONLY)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setblocking(False)
    next_exec = 0.0
    while not stop.is_set():
        for i, data in enumerate(SYSCALL_WRITES):
            if i == 1:
                a.send(data)  # sendto(fd, "password=...", n, 0, NULL, 0)
                b.recv(4096)
            else:
                os.write(sink, data)
        if time.monotonic() >= next_exec:
            next_exec = time.monotonic() + 0.5
            subprocess.run(EXEC_ARGV, executable="/bin/true", check=False)
        stop.wait(interval)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--lib", help="shared library with gputui_block_with (built with -g)")
    ap.add_argument("--lifetime", type=float, default=240.0)
    ap.add_argument("--interval", type=float, default=0.05)
    a, _rest = ap.parse_known_args()  # the planted ARGV follows
    stop = threading.Event()
    threading.Thread(target=_syscalls, args=(stop, a.interval), daemon=True).start()
    r, _w = os.pipe()  # nobody writes: poll waits for the whole lifetime
    if a.lib:  # the C function says `ready` from inside, where gdb will find it
        lib = ctypes.CDLL(a.lib)
        args = [ctypes.c_char_p(s.encode()) for s in MEMORY_ARGS]
        lib.gputui_block_with(*args, r, int(a.lifetime * 1000))
    else:
        print(f"ready {os.getpid()}", flush=True)
        select.select([r], [], [], a.lifetime)
    stop.set()


if __name__ == "__main__":
    main()
