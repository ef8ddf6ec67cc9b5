"""The ssh command lines gputui runs, built in one place.

gputui reaches other hosts through ssh three ways: `ssh HOST CMD` per host (fleet, the world
probe), ssh under pdsh (fleet's `-R ssh`, whose ssh takes extra words from
PDSH_SSH_ARGS_APPEND; the world probe's `-R exec` runs a whole ssh line), and `ssh -G HOST`,
which only prints the configuration (the world probe reads the address an alias stands for).
Each takes the user's `--ssh-config` and `--ssh-option`s the same way, in the same order, and
each that connects has `BatchMode=yes`: a password or host-key prompt would wait forever on a
terminal nobody watches, and BatchMode makes ssh fail at once (exit 255) instead.
`ConnectTimeout` is given where ssh itself is the launcher; under pdsh's ssh module, pdsh's
own `-t` bounds the connection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BATCH_MODE = ("-o", "BatchMode=yes")


def user_options(config: str | None, options: Sequence[str]) -> list[str]:
    """The user's `--ssh-config FILE` and `--ssh-option OPT`s as ssh words: `-F FILE -o OPT...`."""
    out = ["-F", config] if config else []
    for opt in options:
        out += ["-o", opt]
    return out


def ssh_argv(
    host: str,
    command: str,
    *,
    connect_timeout: float,
    options: Sequence[str] = (),
    config: str | None = None,
) -> list[str]:
    """`ssh` running `command` (one shell string on the remote side, quoted by the caller) on
    `host`, never prompting, giving up a connection after `connect_timeout` seconds."""
    timeout = ["-o", f"ConnectTimeout={math.ceil(connect_timeout)}"]
    return ["ssh", *BATCH_MODE, *timeout, *user_options(config, options), "--", host, command]


def config_argv(host: str, *, options: Sequence[str] = (), config: str | None = None) -> list[str]:
    """`ssh -G`: the configuration ssh would use for `host` (its `hostname` line is the address
    an alias stands for); it connects to nothing."""
    return ["ssh", "-G", *user_options(config, options), "--", host]


def pdsh_append(*, options: Sequence[str] = (), config: str | None = None) -> str:
    """PDSH_SSH_ARGS_APPEND for pdsh's ssh module: BatchMode and the user's options."""
    return " ".join([*BATCH_MODE, *user_options(config, options)])
