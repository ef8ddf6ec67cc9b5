"""Redaction of secrets in environments, command lines and tool output.

Training jobs carry tokens (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY...) in their
environment and sometimes on their command line or inside URLs. Anything gputui shows or
writes (bundle, UI) goes through here first. The rules lean towards redacting too much:
a redacted harmless value costs nothing, a leaked token in an incident bundle does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"

# Substrings that make a variable name secret wherever they appear in it.
_SECRET_PARTS = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "PRIVATE",
    "COOKIE",
    "SESSION",
    "AUTH",
    "APIKEY",
    "KEY",
    "SIGNATURE",
    "SALT",
    "DSN",
)
# Whole words (between _ - .) that are secret, but too short to match as substrings.
_SECRET_WORDS = {"PASS", "PWD", "PAT", "PIN", "JWT", "OTP", "BEARER"}
# Names that contain a word above but are well known and harmless.
_NOT_SECRET = {"PWD", "OLDPWD", "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS"}

# user:password@ inside any URL (postgres://, https://, redis://, git+https://...)
_URL_CREDS = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@"
)
# Token formats that are secrets whatever they are called.
_TOKEN_FORMATS = re.compile(
    r"\b(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|sk-[A-Za-z0-9_\-]{20,}"  # OpenAI-style
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # JWT
    r")"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/\-]{8,}=*")
# NAME=value and --flag=value / --flag value where NAME or flag is secret.
_ASSIGN = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<eq>=|: )(?P<value>\S+)")
_FLAG_SPACE = re.compile(
    r"(?P<flag>(?<!\S)--?[A-Za-z][A-Za-z0-9_.\-]*)(?P<sp>\s+)(?P<value>[^\s\-]\S*)"
)


def is_secret_name(name: str) -> bool:
    """Whether a variable (or option) name suggests its value is a secret."""
    n = name.strip().lstrip("-").upper().replace("-", "_")
    if not n or n in _NOT_SECRET:
        return False
    if any(part in n for part in _SECRET_PARTS):
        return True
    return any(w in _SECRET_WORDS for w in re.split(r"[_.]+", n))


def redact_text(text: str) -> str:
    """Redact credentials inside free text: URL passwords, known token formats, bearer
    tokens, and NAME=value / --name=value pairs whose name is secret."""
    text = _URL_CREDS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    text = _TOKEN_FORMATS.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)

    def assign(m: re.Match[str]) -> str:
        if is_secret_name(m["name"]) and m["value"] != REDACTED:
            return f"{m['name']}{m['eq']}{REDACTED}"
        return m.group(0)

    def flag(m: re.Match[str]) -> str:
        if is_secret_name(m["flag"]) and m["value"] != REDACTED:
            return f"{m['flag']}{m['sp']}{REDACTED}"
        return m.group(0)

    return _FLAG_SPACE.sub(flag, _ASSIGN.sub(assign, text))


def redact_value(name: str, value: str) -> str:
    return REDACTED if is_secret_name(name) else redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with secret-named variables and credential-looking values redacted."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secret options redacted: `--token X`, `--api-key=X`, `KEY=X`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and "=" not in arg and is_secret_name(arg):
            out.append(arg)
            hide_next = True
            continue
        out.append(redact_text(arg))
    return out
