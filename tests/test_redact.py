"""Secrets never reach the screen or a bundle; ordinary settings stay readable."""

from __future__ import annotations

import pytest

from gputui.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_text,
)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "DB_PASSWORD",
        "MYSQL_PWD",
        "SMTP_PASS",
        "GITHUB_PAT",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SSH_PRIVATE_KEY",
        "BASIC_AUTH",
        "COOKIE_JAR",
        "SENTRY_DSN",
        "ldap_passwd",
        "--api-key",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "PWD",
        "OLDPWD",
        "HOME",
        "CUDA_VISIBLE_DEVICES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "RANK",
        "NCCL_DEBUG",
        "NCCL_SOCKET_IFNAME",
        "TORCHELASTIC_RUN_ID",
        "XDG_SESSION_ID",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
    ],
)
def test_ordinary_names_are_not_secret(name):
    assert not is_secret_name(name)


def test_redact_env_hides_secret_names_and_credentials_inside_values():
    env = {
        "HF_TOKEN": "hf_abc",
        "PATH": "/usr/bin",
        "DATABASE_URL": "postgres://trainer:hunter2@db:5432/runs",
        "MIRROR": "https://ghp_" + "a" * 36 + "@github.com/x.git",
        "NCCL_DEBUG": "INFO",
    }
    out = redact_env(env)
    assert out["HF_TOKEN"] == REDACTED
    assert out["PATH"] == "/usr/bin" and out["NCCL_DEBUG"] == "INFO"
    assert out["DATABASE_URL"] == f"postgres://trainer:{REDACTED}@db:5432/runs"
    assert "ghp_" not in out["MIRROR"] and "github.com" in out["MIRROR"]
    assert env["HF_TOKEN"] == "hf_abc"  # a copy: the input is untouched


def test_redact_argv_hides_secret_options_in_both_spellings():
    argv = ["python", "train.py", "--token", "t0p", "--api-key=k3y", "--lr", "0.1", "PASS=x"]
    assert redact_argv(argv) == [
        "python",
        "train.py",
        "--token",
        REDACTED,
        f"--api-key={REDACTED}",
        "--lr",
        "0.1",
        f"PASS={REDACTED}",
    ]


def test_redact_text_for_tool_output_and_command_lines():
    line = (
        "Process 9: python t.py --password s3cr3t --url redis://u:pw9@h:1 "
        "Authorization: Bearer abcdefghijkl WANDB_API_KEY=zzz"
    )
    out = redact_text(line)
    for secret in ("s3cr3t", "pw9", "abcdefghijkl", "zzz"):
        assert secret not in out
    assert "python t.py" in out and "redis://u:" in out
    assert redact_text("synchronize (torch/cuda/__init__.py:1162)") == (
        "synchronize (torch/cuda/__init__.py:1162)"
    )
