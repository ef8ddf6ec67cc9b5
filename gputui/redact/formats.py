"""Secrets recognised by their shape alone: well-known key formats and random-looking tokens.

These catch a credential whatever it is called and wherever it stands (a bare argument, an
environment value named CONFIG, a gdb string argument, a strace buffer). Key formats are
exact prefixes and lengths published by their issuers (keyformats.py); here are the shapes
that need more than a prefix (AWS secret keys in context, Azure client secrets, PEM blocks,
webhook URLs). The entropy rule is the backstop for the rest; it is
tuned so that what a GPU node prints stays readable: hex (commit hashes, addresses, GPU
UUIDs), paths, identifiers and kernel names (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`),
version strings and numbers are never flagged. Pure hex keys (a W&B key is 40 hex digits)
are therefore found by their name only.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from gputui.redact.keyformats import KEYS

Span = tuple[int, int]

# An AWS secret access key has no prefix: 40 base64 characters. It is taken where the
# context shows it: beside an access key id, or where `secret_access_key` is named.
_AWS_CONTEXT = re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}|(?i:secret_access_key)")
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")
_HEX = re.compile(r"[0-9a-fA-F]+")
# An Azure AD (Entra ID) client secret: three characters, a digit, `Q~`, 31-34 more.
_AZURE_SECRET = re.compile(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}")
# Webhook URLs whose path is the credential.
_WEBHOOKS = re.compile(
    r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_\-]+)"
    r"|discord(?:app)?\.com/api/webhooks/(?P<d>[0-9]+/[A-Za-z0-9_\-]+)"
)
_PEM = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(.*?)"
    r"(?=-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\"']|\Z)",
    re.S,
)

MIN_RANDOM_LEN = 20
# Runs of base64/base64url characters, with `=` only as padding at the end (so the value of
# `name=value` is judged without its name) and not starting with `-` (so the value of `-pX`
# is judged without its option).
_CANDIDATE = re.compile(
    rf"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_][A-Za-z0-9+/_\-]{{{MIN_RANDOM_LEN - 1},}}={{0,2}}"
)
_UUIDISH = re.compile(r"(?:[A-Za-z]{1,8}-)?[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_HEXISH = re.compile(r"[0-9a-fA-F\-_.:]+|(?:0x)?[0-9a-fA-F]+")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")
_DIGIT = re.compile(r"[0-9]")
_RUNS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def looks_random(token: str) -> bool:
    """Whether a token looks like a generated secret rather than a word, path or number.

    All of these must hold: the characters mix letters and digits (or run 32+ long), with
    upper and lower case in similar numbers (identifiers have capitals only at word starts,
    or only capitals); they do not form words (random strings switch between capitals,
    small letters and digits every 1-2 characters and rarely hold a 4-letter run; names like
    `nvmlDeviceGetC2cModeInfoV1` or `mkl_dft_avx2_ippsDFTFree_C_32f` are made of such runs or
    of many `_`-separated parts); and the characters have high Shannon entropy.
    """
    core = token.strip("=-_")
    if len(core) < MIN_RANDOM_LEN or token.startswith("_Z"):  # short, or a C++ symbol
        return False
    if _HEXISH.fullmatch(core) or _UUIDISH.fullmatch(token):  # hex, a (GPU-)UUID
        return False
    seps = core.count("_") + core.count("-")
    if seps >= 3 and len(core) < 8 * seps:
        return False
    upper = len(_UPPER.findall(core))
    lower = len(_LOWER.findall(core))
    digits = len(_DIGIT.findall(core))
    letters = upper + lower
    if not letters or not (digits or len(core) >= 32):
        return False
    if not 0.2 <= upper / letters <= 0.8:
        return False
    runs = _RUNS.findall(core)
    if not runs or (letters + digits) / len(runs) > 2.6:
        return False
    if sum(len(r) for r in runs if len(r) >= 4) >= 0.6 * (letters + digits):
        return False
    return _entropy(core) >= min(4.0, math.log2(len(core)) - 0.6)


_SECRET_WORDS = re.compile(r"(?i)pass|secret|token|key|cred|auth|bearer|cookie|session|jwt")
_USER_PASSWORD = re.compile(r"[^\s:]+:\S+")
_BINARY = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")


def encodes_plain_text(token: str) -> bool:
    """Whether a random-looking token is base64 of ordinary readable text (a sentence, a
    `key=value` list): it is then not a generated secret, and is shown. Base64 of random
    bytes (a key), of `user:password`, or of text that names a secret is not plain."""
    core = token.rstrip("=")
    if len(core) < 12:
        return False
    try:
        raw = base64.b64decode(
            core + "=" * (-len(core) % 4),
            altchars=b"-_" if "-" in core or "_" in core else None,
            validate=True,
        )
    except (binascii.Error, ValueError):
        return False
    text = raw.decode("utf-8", "replace")
    if not text.strip() or len(_BINARY.findall(text)) > len(text) // 10:
        return False
    if " " not in text.strip() and "=" not in text:
        return False  # one word: a password or a user:password pair, not a sentence
    return not (
        _USER_PASSWORD.fullmatch(text.strip()) or _SECRET_WORDS.search(text) or KEYS.search(text)
    )


_STD_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _blob(tok: str) -> bool:
    """A token with `/` that is one standard base64 blob, random-looking as a whole."""
    return (
        not tok.startswith("/")
        and len(tok) % 4 == 0
        and _STD_BASE64.fullmatch(tok) is not None
        and looks_random(tok.replace("/", "").rstrip("="))
    )


def _random_spans(text: str) -> Iterator[Span]:
    for m in _CANDIDATE.finditer(text):
        tok = m.group(0)
        if "/" in tok:  # a path, or base64 that holds '/': judge each part that is not a path
            if _blob(tok):  # standard base64 as a whole (a path would hold `-`, `_` or `.`)
                if not encodes_plain_text(tok):
                    yield m.span()
                continue
            if tok.startswith("/") or not all(looks_random(p) for p in tok.split("/") if p):
                start = m.start()
                for part in tok.split("/"):
                    if looks_random(part):
                        yield start, start + len(part)
                    start += len(part) + 1
                continue
        if looks_random(tok) and not encodes_plain_text(tok):
            yield m.span()


def aws_context(texts: Iterable[str]) -> bool:
    """Whether an AWS secret key may stand in these texts (a command line's arguments, a
    line): an access key id, or `secret_access_key`, is there."""
    return any(
        ("AKIA" in t or "ASIA" in t or "access_key" in t.lower()) and _AWS_CONTEXT.search(t)
        for t in texts
    )


def aws_secret_spans(text: str) -> Iterator[Span]:
    """40 base64 characters that are not hex (a git SHA is 40 hex digits): where
    aws_context holds, an AWS secret access key."""
    for m in _AWS_SECRET.finditer(text):
        if not _HEX.fullmatch(m.group(0)):
            yield m.span()


def format_spans(text: str) -> Iterator[Span]:
    """Spans of key formats (keyformats.py), AWS secret keys in context, Azure client
    secrets, PEM private key bodies, webhook paths and random tokens."""
    for m in KEYS.finditer(text):
        yield m.span()
    if aws_context((text,)):
        yield from aws_secret_spans(text)
    if "Q~" in text:
        for m in _AZURE_SECRET.finditer(text):
            yield m.span()
    if "hooks" in text:
        for m in _WEBHOOKS.finditer(text):
            g = "s" if m.group("s") else "d"
            yield m.span(g)
    if "PRIVATE KEY" in text:
        for m in _PEM.finditer(text):
            if m.group(2).strip():
                yield m.span(2)
    yield from _random_spans(text)
