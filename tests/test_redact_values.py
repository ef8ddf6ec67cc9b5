"""Secrets found by what they look like or where they stand in a value, wherever it is:
URLs, query strings, JSON, connection strings, `name: value`, key formats, PEM keys, JWTs,
random tokens, and the quoted strings gdb and strace print. Only the secret is replaced.
"""

from __future__ import annotations

import pytest

from gputui.redact import REDACTED, redact_text
from gputui.redact.formats import looks_random
from gputui.redact.scan import decode_c_string

R = REDACTED


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgres://trainer:hunter2@db:5432/runs", f"postgres://trainer:{R}@db:5432/runs"),
        # a password holding @ and / is read from the right
        ("postgres://u:p@ss/w0rd@db.internal:5432/x", f"postgres://u:{R}@db.internal:5432/x"),
        ("redis://:pw1@cache:6379/0", f"redis://:{R}@cache:6379/0"),
        (
            "mongodb+srv://app:pw2@cluster0.example.net/db?w=majority",
            f"mongodb+srv://app:{R}@cluster0.example.net/db?w=majority",
        ),
        ("mongodb://u:pw3@h1:27017,h2:27017/db", f"mongodb://u:{R}@h1:27017,h2:27017/db"),
        (
            "https://x-access-token:pw4@github.com/o/r.git",
            f"https://x-access-token:{R}@github.com/o/r.git",
        ),
        # no password: a port, an @ in a path or a query
        ("http://node1:8080/v1/models@latest", "http://node1:8080/v1/models@latest"),
        ("https://github.com/org/repo@v1.2", "https://github.com/org/repo@v1.2"),
        ("https://h/p?email=a@b.example", "https://h/p?email=a@b.example"),
    ],
)
def test_url_passwords(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://h/x?a=1&token=T1&b=2", f"https://h/x?a=1&token={R}&b=2"),
        ("https://h/x?access_token=T2", f"https://h/x?access_token={R}"),
        ("https://h/x?key=T3&alt=json", f"https://h/x?key={R}&alt=json"),
        ("https://h/x?api_key=T4", f"https://h/x?api_key={R}"),
        (
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030&sp=r&sig=T5",
            f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030&sp=r&sig={R}",
        ),
        (
            "https://b.s3.amazonaws.com/m?X-Amz-Credential=T6&X-Amz-Signature=T7&X-Amz-Expires=9",
            f"https://b.s3.amazonaws.com/m?X-Amz-Credential={R}&X-Amz-Signature={R}&X-Amz-Expires=9",
        ),
        ("https://h/x?password=T8&secret=T9", f"https://h/x?password={R}&secret={R}"),
    ],
)
def test_credential_query_keys(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"api_key": "J1", "user": "bob"}', f'{{"api_key": "{R}", "user": "bob"}}'),
        (
            '{"db": {"host": "db1", "password": "J2"}, "n": 3}',
            f'{{"db": {{"host": "db1", "password": "{R}"}}, "n": 3}}',
        ),
        ('{"pin": 1234, "retries": 3}', f'{{"pin": {R}, "retries": 3}}'),
        ('{"api_keys": ["J3", "J4"], "x": 1}', f'{{"api_keys": {R}, "x": 1}}'),
        ('{"credentials": {"user": "u", "k": "J5"}}', f'{{"credentials": {R}}}'),
        ("{'password': 'J6', 'user': 'u'}", f"{{'password': '{R}', 'user': 'u'}}"),
        ('{"token": "J7 with spaces"}', f'{{"token": "{R}"}}'),
        ('{"password": "a\\"b"}', f'{{"password": "{R}"}}'),
        # JSON inside a JSON string
        ('{"cfg": "{\\"password\\": \\"J8\\"}"}', f'{{"cfg": "{{\\"password\\": \\"{R}\\"}}"}}'),
    ],
)
def test_json_keys_at_any_depth(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Server=tcp:db,1433;User ID=u;Password=C1;Encrypt=true",
            f"Server=tcp:db,1433;User ID=u;Password={R};Encrypt=true",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=C2+/==;EndpointSuffix=x",
            f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={R};EndpointSuffix=x",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=C3",
            f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey={R}",
        ),
        ("host=db user=u password=C4 dbname=x", f"host=db user=u password={R} dbname=x"),
        ("password:C5", f"password:{R}"),
        ("password: C6 and more", f"password: {R}"),
        ("Authorization: Bearer C7abcdefgh", f"Authorization: Bearer {R}"),
        ("Authorization: token C8abcdefgh", f"Authorization: token {R}"),
        ("Cookie: sid=C9; theme=dark", f"Cookie: {R}"),
        ("X-Api-Key: C10", f"X-Api-Key: {R}"),
        ("//registry.npmjs.org/:_authToken=C11", f"//registry.npmjs.org/:_authToken={R}"),
        (
            "machine pypi.org login __token__ password C12",
            f"machine pypi.org login __token__ password {R}",
        ),
    ],
)
def test_connection_strings_headers_and_name_value_pairs(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "token",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAJEXAMPLEXEG2JICE",
        "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
        "ya29.a0AfH6SMBx1234567890abcdefghijklmn",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_51H8abcdefghijklmnopqrst",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAxMg",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789",
        "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
        "glpat-xxxxxxxxxxxxxxxxxxxx",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        "dapi0123456789abcdef0123456789abcdef",
    ],
)
def test_well_known_key_formats_whatever_they_are_called(token):
    assert redact_text(f"note={token} end") == f"note={R} end"
    assert redact_text(f"see {token}, then") == f"see {R}, then"


def test_an_aws_secret_key_next_to_its_access_key_id():
    text = "aws AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert redact_text(text) == f"aws {R} {R}"


def test_pem_private_key_blocks_keep_their_armour():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nxyz\n-----END RSA PRIVATE KEY-----\n"
    assert redact_text(pem) == (
        f"-----BEGIN RSA PRIVATE KEY-----{R}-----END RSA PRIVATE KEY-----\n"
    )
    cut = 'write(3, "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNz"..., 400) = 400'
    assert redact_text(cut) == f'write(3, "-----BEGIN OPENSSH PRIVATE KEY-----{R}"..., 400) = 400'


def test_webhook_urls_hide_their_secret_path():
    assert redact_text("https://hooks.slack.com/services/T000/B000/XXXX") == (
        f"https://hooks.slack.com/services/{R}"
    )
    assert redact_text("https://discord.com/api/webhooks/123/abc-DEF") == (
        f"https://discord.com/api/webhooks/{R}"
    )


@pytest.mark.parametrize(
    "token",
    ["Xk9mQ2vL7rT4wZ8bYt6Re3Wq", "q7Zt2LmP9xVb4NcR8sKd3FhJ6gWy", "aB3dE5gH7jK9mN1pQ3sT5vX7zB9d"],
)
def test_random_looking_tokens_under_any_name(token):
    assert looks_random(token)
    assert redact_text(f"CONFIG={token}") == f"CONFIG={R}"


@pytest.mark.parametrize(
    "word",
    [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "nvmlDeviceGetC2cModeInfoV1",
        "_PyEval_EvalFrameDefault",
        "mkl_dft_avx2_ippsDFTFree_C_32f",
        "_ZN5torch8autograd6Engine11thread_mainERKSt10shared_ptrINS0_9GraphTaskEE",
        "GPU-8f2a3b4c-1d2e-3f4a-5b6c-7d8e9f0a1b2c",
        "8cca527612d856d7d32bd94f8103728d614eb852",
        "0x00007f992be40f7b",
        "cp312-cp312-manylinux_2_17_x86_64",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "models--meta-llama--Llama-2-7b-hf",
        "12345678901234567890123",
    ],
)
def test_identifiers_hashes_and_numbers_do_not_look_random(word):
    assert not looks_random(word)


def test_c_strings_are_decoded_with_a_map_back_to_the_original():
    text, starts = decode_c_string(r"\1\2pw=\x41\n")
    assert text == "\x01\x02pw=A\n"
    assert starts == [0, 2, 4, 5, 6, 7, 11, 13]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # strace: buffers, escapes, argv arrays
        (
            'write(3, "Authorization: Bearer abcdefghij", 32) = 32',
            f'write(3, "Authorization: Bearer {R}", 32) = 32',
        ),
        (
            'sendto(4, "password=hunter2-x", 18, 0, NULL, 0) = 18',
            f'sendto(4, "password={R}", 18, 0, NULL, 0) = 18',
        ),
        # (a value read outside the string runs to its quote: an escape after it goes too)
        (
            'write(3, "\\1\\2token=hunter2-y\\177", 20) = 20',
            f'write(3, "\\1\\2token={R}", 20) = 20',
        ),
        (
            'write(1, "a\\nPW=hunter2-z\\n", 16) = 16',
            f'write(1, "a\\nPW={R}", 16) = 16',
        ),
        (
            'execve("/usr/bin/mysql", ["mysql", "-phunter2", "--password", "x9"], 0x7f) = 0',
            f'execve("/usr/bin/mysql", ["mysql", "-p{R}", "--password", "{R}"], 0x7f) = 0',
        ),
        (
            'execve("/bin/env", ["env", "DB_PW=x1", "run"], 0x7ffd /* 3 vars */) = 0',
            f'execve("/bin/env", ["env", "DB_PW={R}", "run"], 0x7ffd /* 3 vars */) = 0',
        ),
        # gdb: string arguments, after a secret-named parameter or by their own form
        (
            '#1  0x00007f in connect (url=0x5555 "postgres://u:pw@h/db", port=5432) at c.c:4',
            f'#1  0x00007f in connect (url=0x5555 "postgres://u:{R}@h/db", port=5432) at c.c:4',
        ),
        (
            '#2  login (user=0x1 "bob", password=0x55d5c0 "hunter2") at l.c:9',
            f'#2  login (user=0x1 "bob", password=0x55d5c0 "{R}") at l.c:9',
        ),
        (
            '#3  f (passwd=passwd@entry=0x7ffc "hunter2", n=1) at f.c:1',
            f'#3  f (passwd=passwd@entry=0x7ffc "{R}", n=1) at f.c:1',
        ),
        # py-spy's header: the command line
        (
            "Process 4242: python train.py --pw hunter2 -phunter3 --lr 0.1",
            f"Process 4242: python train.py --pw {R} -p{R} --lr 0.1",
        ),
    ],
)
def test_tool_output_is_redacted_inside_quoted_strings(line, expected):
    assert redact_text(line) == expected
