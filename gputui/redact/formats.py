"""Secrets recognised by their shape alone: well-known key formats and random-looking tokens.

These catch a credential whatever it is called and wherever it stands (an environment value
named CONFIG, a gdb string argument, a strace buffer). Key formats are exact prefixes and
lengths published by their issuers. The entropy rule is the backstop for the rest; it is
tuned so that what a GPU node prints stays readable: hex (commit hashes, addresses, GPU
UUIDs), paths, identifiers and kernel names (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`),
version strings and numbers are never flagged. Pure hex keys (a W&B key is 40 hex digits)
are therefore found by their name only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

Span = tuple[int, int]

_B = r"(?<![A-Za-z0-9_\-])"  # not in the middle of a longer token
_TOKEN_FORMATS = re.compile(
    _B
    + r"(?:"
    + r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}"  # AWS ids
    + r"|AIza[0-9A-Za-z_\-]{35}"  # Google API key
    + r"|ya29\.[0-9A-Za-z_\-]{20,}"  # Google OAuth access token
    + r"|GOCSPX-[0-9A-Za-z_\-]{20,}"  # Google OAuth client secret
    + r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"  # Stripe secret / restricted keys
    + r"|whsec_[0-9A-Za-z]{20,}"  # Stripe webhook secret
    + r"|xox[abposre]-[0-9A-Za-z\-]{10,}"  # Slack bot/user/... tokens
    + r"|xoxe\.xox[bp]-[0-9A-Za-z\-]{10,}|xoxe-[0-9A-Za-z\-]{10,}"  # Slack refresh tokens
    + r"|xapp-\d-[0-9A-Za-z\-]{10,}"  # Slack app-level token
    + r"|npm_[0-9A-Za-z]{36}"  # npm
    + r"|pypi-[0-9A-Za-z_\-]{50,}"  # PyPI upload token
    + r"|gh[pousr]_[0-9A-Za-z]{30,}"  # GitHub classic tokens
    + r"|github_pat_[0-9A-Za-z_]{22,}"  # GitHub fine-grained token
    + r"|gl(?:pat|dt|ptt|rt|soat|cbt|ft|imt|oas|agent)-[0-9A-Za-z_\-]{20,}"  # GitLab
    + r"|GR1348941[0-9A-Za-z_\-]{20,}"  # GitLab runner registration token
    + r"|hf_[0-9A-Za-z]{30,}|api_org_[0-9A-Za-z]{30,}"  # Hugging Face
    + r"|sk-(?:ant-|proj-|svcacct-|admin-)?[0-9A-Za-z_\-]{20,}"  # OpenAI, Anthropic
    + r"|eyJ[0-9A-Za-z_\-]{8,}\.[0-9A-Za-z_\-]{8,}\.[0-9A-Za-z_\-]{8,}"  # JWT
    + r"|SG\.[0-9A-Za-z_\-]{16,}\.[0-9A-Za-z_\-]{16,}"  # SendGrid
    + r"|dapi[0-9a-f]{32}"  # Databricks
    + r"|dop_v1_[0-9a-f]{64}"  # DigitalOcean
    + r"|shp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}"  # Shopify
    + r"|AGE-SECRET-KEY-1[0-9A-Z]{58}"  # age
    + r")"
)
_AWS_ACCESS_KEY_ID = re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}")
# An AWS secret access key: 40 base64 characters, flagged when an access key id is near.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")
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
    if token.startswith("_Z"):  # a mangled C++ symbol
        return False
    core = token.strip("=-_")
    if len(core) < MIN_RANDOM_LEN or _HEXISH.fullmatch(core):
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


def _random_spans(text: str) -> Iterator[Span]:
    for m in _CANDIDATE.finditer(text):
        tok = m.group(0)
        if "/" in tok:  # a path, or base64 that holds '/': judge each part that is not a path
            if tok.startswith("/") or not all(looks_random(p) for p in tok.split("/") if p):
                start = m.start()
                for part in tok.split("/"):
                    if looks_random(part):
                        yield start, start + len(part)
                    start += len(part) + 1
                continue
        if looks_random(tok):
            yield m.span()


def format_spans(text: str) -> Iterator[Span]:
    """Spans of key formats, PEM private key bodies, webhook paths and random tokens."""
    for m in _TOKEN_FORMATS.finditer(text):
        yield m.span()
    if _AWS_ACCESS_KEY_ID.search(text):
        for m in _AWS_SECRET.finditer(text):
            yield m.span()
    for m in _WEBHOOKS.finditer(text):
        g = "s" if m.group("s") else "d"
        yield m.span(g)
    if "PRIVATE KEY" in text:
        for m in _PEM.finditer(text):
            if m.group(2).strip():
                yield m.span(2)
    yield from _random_spans(text)
