"""Which names (environment variables, options, JSON keys, query keys) hold a secret.

Names are split into words (`_ - .`, camelCase) and judged word by word, because a list of
whole names always misses the next spelling (`SSHPASS`, `DB_PW`, `--creds`, `apiKey`):

- strong words make any name secret wherever they stand: PASSWORD, SECRET, CREDENTIALS...;
- weak words only when they END the name, because they also start ordinary settings:
  `HF_TOKEN` but not `max_new_tokens` or `bos_token_id`, `API_KEY` but not
  `num_key_value_heads`, `--pin X` but not `--pin-memory`, `SSH_AUTH` but not `SSH_AUTH_SOCK`;
- a glued compound word counts when it contains a strong word or ends with a weak one
  (`PGPASSWORD`, `SSHPASS`, `MYSQLPWD`), minus a few ordinary words (`BYPASS`, `HOTKEY`).

The short option `-p` is a password (mysql, sshpass): a port after it is hidden too, which
costs little, but a path (`mkdir -p /x`) is not. `PWD` and `OLDPWD` themselves are the
working directory, not a password. A secret name whose last word is FILE, PATH or DIR
(`--secret-file`, `DB_PASSWORD_FILE`) holds where the secret is: a path value is shown, as
it helps and hides nothing; any other value is still redacted.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Secret wherever they stand in a name.
_STRONG = frozenset(
    {
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASSPHRASE",
        "PASSCODE",
        "SECRET",
        "SECRETS",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "APIKEY",
        "APIKEYS",
        "JWT",
        "BEARER",
        "COOKIE",
        "COOKIES",
        "SSHPASS",
    }
)
# Substrings of a glued word that make it secret (PGPASSWORD, CLIENTSECRET, MYAPIKEY).
_STRONG_PARTS = ("PASSWORD", "PASSWD", "PASSPHRASE", "PASSCODE", "SECRET", "CREDENTIAL", "APIKEY")
# Secret when they are the last word of the name.
_WEAK_LAST = frozenset(
    {
        "TOKEN",
        "KEY",
        "KEYS",
        "PASS",
        "PW",
        "PWD",
        "PIN",
        "PAT",
        "OTP",
        "AUTH",
        "AUTHORIZATION",
        "SESSION",
        "SIG",
        "SIGNATURE",
        "SALT",
        "DSN",
        "CRED",
        "WEBHOOK",
        "PRIVKEY",
    }
)
# A glued last word ending in one of these is secret (AUTHTOKEN, SSHKEY, DBPASS, MYSQLPWD).
_WEAK_SUFFIXES = ("TOKEN", "KEY", "PASS", "PWD", "PW")
# Ordinary words with such an ending.
_NOT_SECRET_WORDS = frozenset(
    {
        "BYPASS",
        "COMPASS",
        "SURPASS",
        "OVERPASS",
        "UNDERPASS",
        "HOTKEY",
        "MONKEY",
        "TURKEY",
        "DONKEY",
        "JOCKEY",
        "HOCKEY",
        "WHISKEY",
        "PKEY",  # NCCL_IB_PKEY: an InfiniBand partition key index
        "OLDPWD",
    }
)
# Trailing words that do not change what a name holds (API_KEY_1, HF_TOKEN_VALUE).
_TRANSPARENT = frozenset({"VALUE", "VAL", "STR", "STRING", "B64", "BASE64", "HEX", "RAW", "V2"})
# Environment variables that are well known and harmless although a word above matches.
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
# A secret-named option or variable whose last word is one of these holds a path to the secret
# (`--secret-file /run/secrets/db`, `DB_PASSWORD_FILE`): a path value is shown.
_PATH_WORDS = frozenset({"FILE", "PATH", "DIR", "FILENAME", "FILEPATH", "LOCATION"})
# Boolean switches: `--no-auth`, `--use-auth-token` take no value; nor does
# `--password-stdin` (docker login), which reads the secret from standard input.
_SWITCH_PREFIXES = ("NO", "DISABLE", "ENABLE", "USE", "SKIP")
_SWITCH_SUFFIXES = ("STDIN",)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> list[str]:
    """`--apiKey`, `X-Amz-Signature`, `db.password_2` -> upper-case words, digits dropped."""
    words = []
    for part in _SPLIT.split(_CAMEL.sub("_", name)):
        w = part.upper().rstrip("0123456789")
        if w:
            words.append(w)
    return words


def _secret_word(w: str, last: bool) -> bool:
    if w in _NOT_SECRET_WORDS:
        return False
    if w in _STRONG or any(p in w for p in _STRONG_PARTS):
        return True
    if not last:
        return False
    return w in _WEAK_LAST or w.endswith(_WEAK_SUFFIXES)


def is_secret_name(name: str) -> bool:
    """Whether a variable, option or key name suggests that its value is a secret.

    Args:
        name: a variable, option or key name.

    Returns:
        True when its words say secret (token, password, key...).
    """
    if len(name) > 256:  # a crafted argument: judge it, but do not keep it in the cache
        return _judge(name)
    return _judge_cached(name)


def _judge(name: str) -> bool:
    name = name.strip()
    if name in _NOT_SECRET_ENV:
        return False
    if name in ("-p", "-p="):
        return True
    words = name_words(name)
    while len(words) > 1 and words[-1] in _TRANSPARENT:
        words.pop()
    if not words:
        return False
    if (
        name.startswith("-")
        and len(words) > 1
        and (words[0] in _SWITCH_PREFIXES or words[-1] in _SWITCH_SUFFIXES)
    ):
        return False  # --no-auth, --use-auth-token, --password-stdin: switches
    return any(_secret_word(w, i == len(words) - 1) for i, w in enumerate(words))


# The same few names come back on every line and every tick.
_judge_cached = lru_cache(maxsize=4096)(_judge)


def holds_a_path(name: str) -> bool:
    """`--secret-file`, `PASSWORD_FILE`: the value names where the secret is, not the secret."""
    words = name_words(name)
    return bool(words) and words[-1] in _PATH_WORDS


_PATH_VALUE = re.compile(r"(?:~|\.{1,2})?/[^\s:@;=&?#\"']*")


def looks_like_path(value: str) -> bool:
    """An absolute or ./ ~/ path without anything that could carry a credential."""
    return _PATH_VALUE.fullmatch(value) is not None
