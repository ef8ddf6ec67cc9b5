"""Secret names, environments and command lines: every spelling of a secret is hidden, and
ordinary settings stay readable.

Names are judged by their words (tests of `is_secret_name`); an environment hides the
values of secret names and the secrets inside other values; a command line hides the value
after any secret option, short or long, glued or not.
"""

from __future__ import annotations

import pytest

from gputui.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_text,
    redact_value,
)

R = REDACTED


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
        # the spellings that leaked before (issue 11)
        "SSHPASS",
        "PW",
        "DB_PW",
        "PASSCODE",
        "CREDS",
        "--pw",
        "--pwd",
        "--passcode",
        "--creds",
        "-p",
        # glued, camelCase, dotted, numbered
        "PGPASSWORD",
        "AUTHTOKEN",
        "apiKey",
        "accessToken",
        "keyStorePassword",
        "AccountKey",
        "SharedAccessSignature",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "trainer.logger.api_key",
        "API_KEY_2",
        "HF_TOKEN_VALUE",
        "sig",
        "Authorization",
        "Cookie",
        "_authToken",
        "client_secret",
    ],
)
def test_names_that_hold_a_secret(name):
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
        "NCCL_IB_HCA",
        "NCCL_IB_PKEY",
        "TORCHELASTIC_RUN_ID",
        "XDG_SESSION_ID",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "TOKENIZERS_PARALLELISM",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "AWS_ACCESS_KEY_ID",
        "--max-new-tokens",
        "bos_token_id",
        "num_key_value_heads",
        "--pin-memory",
        "--no-auth",
        "--use-auth-token",
        "--bypass",
        "top_p",
        "private",
        "-P",
        "p",
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
    assert out["HF_TOKEN"] == R
    assert out["PATH"] == "/usr/bin" and out["NCCL_DEBUG"] == "INFO"
    assert out["DATABASE_URL"] == f"postgres://trainer:{R}@db:5432/runs"
    assert "ghp_" not in out["MIRROR"] and "github.com" in out["MIRROR"]
    assert env["HF_TOKEN"] == "hf_abc"  # a copy: the input is untouched


def test_the_environment_names_that_leaked_before_are_hidden():
    env = {k: "s3cr3t-" + k for k in ("SSHPASS", "PW", "DB_PW", "PASSCODE", "CREDS")}
    assert set(redact_env(env).values()) == {R}


def test_a_secret_file_path_is_shown_but_not_a_secret_in_its_place():
    assert redact_value("DB_PASSWORD_FILE", "/run/secrets/db") == "/run/secrets/db"
    assert redact_value("DB_PASSWORD_FILE", "hunter2") == R
    assert redact_value("HF_TOKEN", "") == ""  # an empty secret: nothing to hide, and it tells


def test_pwd_is_the_working_directory_but_pwd_options_and_keys_are_passwords():
    assert redact_env({"PWD": "/home/u/run"}) == {"PWD": "/home/u/run"}
    assert redact_argv(["tool", "--pwd", "hunter2"]) == ["tool", "--pwd", R]
    assert redact_text("Server=db;Uid=u;Pwd=hunter2;") == f"Server=db;Uid=u;Pwd={R};"


def test_redact_argv_hides_secret_options_in_both_spellings():
    argv = ["python", "train.py", "--token", "t0p", "--api-key=k3y", "--lr", "0.1", "PASS=x"]
    assert redact_argv(argv) == [
        "python",
        "train.py",
        "--token",
        R,
        f"--api-key={R}",
        "--lr",
        "0.1",
        f"PASS={R}",
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["mysql", "-p", "X"], ["mysql", "-p", R]),
        (["mysql", "-pX1y2"], ["mysql", f"-p{R}"]),
        (["t", "--pw", "X"], ["t", "--pw", R]),
        (["t", "--pw=X"], ["t", f"--pw={R}"]),
        (["t", "--passcode", "X"], ["t", "--passcode", R]),
        (["t", "--creds", "X"], ["t", "--creds", R]),
        (["t", "--pwd", "X"], ["t", "--pwd", R]),
        (["t", "-password", "X"], ["t", "-password", R]),
        (["t", "--clientSecret", "X"], ["t", "--clientSecret", R]),
        (["t", "--password", "-starts-with-dash"], ["t", "--password", R]),
        (["curl", "-u", "alice:X"], ["curl", "-u", f"alice:{R}"]),
        (["curl", "--user=alice:X"], ["curl", f"--user=alice:{R}"]),
        (["env", "DB_PW=X", "run"], ["env", f"DB_PW={R}", "run"]),
        (["t", "trainer.logger.api_key=X"], ["t", f"trainer.logger.api_key={R}"]),
        (["t", "--url", "https://h/v1?a=1&token=X"], ["t", "--url", f"https://h/v1?a=1&token={R}"]),
        (["t", '{"api_key": "X"}'], ["t", f'{{"api_key": "{R}"}}']),
        (["t", "password:X"], ["t", f"password:{R}"]),
        (["t", "--db", "postgres://u:X@h/db"], ["t", "--db", f"postgres://u:{R}@h/db"]),
    ],
)
def test_every_spelling_of_a_secret_option_on_a_command_line(argv, expected):
    assert redact_argv(argv) == expected


def test_a_switch_that_is_not_secret_named_does_not_hide_the_next_option():
    argv = ["train", "--use-token", "--epochs", "3", "--no-password", "-v"]
    assert redact_argv(argv) == argv
    assert redact_argv(["docker", "login", "--password-stdin", "reg.io"])[-1] == "reg.io"


def test_after_a_secret_option_the_next_argument_is_its_value_even_when_it_looks_like_one():
    """A password may start with a dash: `--password --dashPW33` leaked in snapshot --json."""
    argv = ["train", "--password", "--dashPW33", "--lr", "3", "--token", "-x"]
    assert redact_argv(argv) == ["train", "--password", R, "--lr", "3", "--token", R]
    assert redact_text(" ".join(argv)) == f"train --password {R} --lr 3 --token {R}"
    # the short letters that are a password to some tools only still took no value
    assert redact_argv(["mkdir", "-p", "-m", "755", "/x"]) == ["mkdir", "-p", "-m", "755", "/x"]
    assert redact_text("mkdir -p --password X9 /d") == f"mkdir -p --password {R} /d"


def test_what_follows_p_is_hidden_unless_it_is_a_path():
    assert redact_argv(["mkdir", "-p", "/tmp/run/ckpt"]) == ["mkdir", "-p", "/tmp/run/ckpt"]
    assert redact_argv(["ssh", "-p", "2222", "node1"]) == ["ssh", "-p", R, "node1"]  # a port: cheap
    assert redact_argv(["gcc", "-pthread", "-pipe", "x.c"]) == ["gcc", "-pthread", "-pipe", "x.c"]
    assert redact_argv(["openssl", "-pass", "pass:X"]) == ["openssl", "-pass", R]


def test_a_whole_command_line_in_one_argument_is_scanned_as_text():
    # setproctitle and `bash -c` put a whole command line into one argument
    out = redact_argv(["bash", "-c", "mysql -pX1 --password 'a b' && curl -u al:X2 h"])
    assert out == ["bash", "-c", f"mysql -p{R} --password '{R}' && curl -u al:{R} h"]


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


def test_a_crafted_long_option_is_judged_without_filling_the_name_cache():
    long_name = "--" + "a" * 100_000 + "-password"
    assert redact_argv([long_name, "x1"]) == [long_name, R]
    assert not is_secret_name("--" + "b" * 100_000)
