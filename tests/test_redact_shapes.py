"""Secrets recognised by their own shape, wherever they stand, and look-alikes that stay.

Every format of gputui.redact.keyformats (and the shapes that need more than a prefix: AWS
secret keys in context, Azure client secrets, PEM blocks, credentials in URLs, Azure
connection strings) is checked with an example built here, at test time, from its prefix
and a random body of the issuer's alphabet: no real-looking key is committed verbatim, so
secret scanners have nothing to flag in this repository. Each example must be redacted as a
bare argument, inside text, in JSON, after `=`, inside a quoted C string, and in py-spy's
`Process N:` header; the text around it must stay. Then the look-alikes a GPU node prints
(hashes, git SHAs, UUIDs, ordinary base64, model names, paths, numbers) must come through
unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

import pytest

from gputui.redact import REDACTED, redact_argv, redact_command, redact_env, redact_text
from gputui.redact.keyformats import KEY_FORMATS, KEYS

R = REDACTED
_RNG = random.Random(34)
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
URL64 = ALNUM + "_-"
B64 = ALNUM + "+/"


def body(n: int, alphabet: str = ALNUM) -> str:
    """`n` characters of `alphabet`, mixed enough to be unlike a word."""
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def jwt() -> str:
    def part(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    sig = body(43, URL64)
    return ".".join([part({"alg": "HS256", "typ": "JWT"}), part({"sub": body(12)}), sig])


# (format, an example of it): prefixes are split from their bodies so that no line of this
# file holds a whole key.
EXAMPLES: list[tuple[str, str]] = [
    ("AWS access key id", "AK" + "IA" + body(16, UPPER + "234567")),
    ("AWS access key id", "AS" + "IA" + body(16, UPPER + DIGITS)),
    ("AWS access key id", "A3T" + "X" + body(16, UPPER + DIGITS)),
    ("AWS Bedrock API key", "AB" + "SK" + body(120, B64)),
    ("Google API key", "AI" + "za" + body(35, URL64)),
    ("Google OAuth access token", "ya" + "29." + body(60, URL64)),
    ("Google OAuth client secret", "GOC" + "SPX-" + body(28, URL64)),
    ("Alibaba Cloud access key id", "LT" + "AI" + body(20)),
    ("DigitalOcean token", "dop" + "_v1_" + body(64, HEX)),
    ("Heroku API key", "HRKU" + "-AA" + body(58, URL64)),
    ("Fly.io token", "fo1" + "_" + body(43, URL64)),
    ("Vault token", "hv" + "s." + body(95, URL64)),
    ("Doppler token", "dp." + "pt." + body(43)),
    ("Pulumi token", "pul" + "-" + body(40, HEX)),
    ("Databricks token", "da" + "pi" + body(32, HEX)),
    ("PlanetScale token", "pscale" + "_tkn_" + body(43, URL64)),
    ("OpenShift token", "sha256" + "~" + body(43, URL64)),
    ("GitHub token", "gh" + "p_" + body(36)),
    ("GitHub token", "gh" + "o_" + body(36)),
    ("GitHub token", "gh" + "u_" + body(36)),
    ("GitHub token", "gh" + "s_" + body(36)),
    ("GitHub token", "gh" + "r_" + body(36)),
    ("GitHub fine-grained token", "github" + "_pat_" + body(22) + "_" + body(59)),
    ("GitLab token", "gl" + "pat-" + body(20, URL64)),
    ("GitLab runner registration token", "GR134" + "8941" + body(20, URL64)),
    ("npm token", "np" + "m_" + body(36)),
    ("PyPI token", "py" + "pi-AgEI" + "cHlwaS5vcmc" + body(60, URL64)),
    ("RubyGems token", "rubygems" + "_" + body(48, HEX)),
    ("Artifactory key", "AK" + "Cp" + body(69)),
    ("Atlassian token", "ATA" + "TT3" + body(186, URL64)),
    ("OpenAI or Anthropic key", "sk" + "-" + body(48)),
    ("OpenAI or Anthropic key", "sk" + "-proj-" + body(80, URL64)),
    ("OpenAI or Anthropic key", "sk" + "-ant-api03-" + body(93, URL64) + "AA"),
    ("Hugging Face token", "h" + "f_" + body(34)),
    ("Hugging Face token", "api" + "_org_" + body(34)),
    ("Replicate token", "r" + "8_" + body(37)),
    ("Groq key", "gs" + "k_" + body(52)),
    ("xAI key", "xa" + "i-" + body(80)),
    ("Perplexity key", "pp" + "lx-" + body(48)),
    ("LangSmith key", "lsv2" + "_pt_" + body(32, HEX) + "_" + body(10, HEX)),
    ("Pinecone key", "pc" + "sk_" + body(60)),
    ("Together key", "tgp" + "_v1_" + body(43, URL64)),
    ("Cerebras key", "cs" + "k-" + body(48, LOWER + DIGITS)),
    ("Slack token", "xo" + "xb-" + body(12, DIGITS) + "-" + body(13, DIGITS) + "-" + body(24)),
    ("Slack token", "xo" + "xp-" + body(12, DIGITS) + "-" + body(30)),
    ("Slack app token", "xa" + "pp-1-" + body(11) + "-" + body(13, DIGITS) + "-" + body(64)),
    ("Stripe key", "sk" + "_live_" + body(24)),
    ("Stripe key", "rk" + "_live_" + body(24)),
    ("Square token", "sq0" + "atp-" + body(22, URL64)),
    ("SendGrid key", "S" + "G." + body(22, URL64) + "." + body(43, URL64)),
    ("Sendinblue key", "xkey" + "sib-" + body(64, HEX) + "-" + body(16)),
    ("Twilio API key", "S" + "K" + body(32, HEX)),
    ("Shopify token", "shp" + "at_" + body(32, HEX)),
    ("Shippo token", "shippo" + "_live_" + body(40, HEX)),
    ("Grafana token", "gl" + "c_" + body(40, B64)),
    ("Grafana token", "gl" + "sa_" + body(32) + "_" + body(8, HEX)),
    ("Sentry token", "sntr" + "yu_" + body(64, HEX)),
    ("New Relic key", "NR" + "AK-" + body(27, UPPER + DIGITS)),
    ("Dynatrace token", "dt0" + "c01." + body(24) + "." + body(64)),
    ("Postman key", "PM" + "AK-" + body(24, HEX) + "-" + body(34, HEX)),
    ("Linear key", "lin" + "_api_" + body(40)),
    ("Notion token", "nt" + "n_" + body(11, DIGITS) + body(35)),
    ("Prefect key", "pn" + "u_" + body(36)),
    ("Infracost key", "ic" + "o-" + body(32)),
    ("Typeform token", "tf" + "p_" + body(59, URL64)),
    ("Frame.io token", "fio" + "-u-" + body(64, URL64)),
    ("EasyPost key", "EZ" + "AK" + body(54)),
    ("1Password token", "ops" + "_eyJ" + body(250, B64)),
    ("age secret key", "AGE-SECRET" + "-KEY-1" + body(58, UPPER + DIGITS)),
    ("JWT", jwt()),
    ("base64 of a JSON object", base64.b64encode(json.dumps({"k": body(60)}).encode()).decode()),
]


def test_every_format_in_the_catalogue_has_an_example():
    named = {name for name, _ in EXAMPLES}
    missing = [name for name, _ in KEY_FORMATS if name not in named and name != "JWT (any header)"]
    assert not missing


@pytest.mark.parametrize(
    ("name", "key"), EXAMPLES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXAMPLES)]
)
def test_a_key_is_redacted_by_its_shape_wherever_it_stands(name, key):
    assert KEYS.search(key) is not None and KEYS.search(key).group(0) == key, name
    assert redact_argv(["python", "train.py", key, "--lr", "3"]) == [
        "python",
        "train.py",
        R,
        "--lr",
        "3",
    ]
    assert redact_text(f"using {key} now") == f"using {R} now"
    assert redact_text(f"CONFIG={key};x=1") == f"CONFIG={R};x=1"
    assert redact_text(json.dumps({"cfg": key})) == json.dumps({"cfg": R})
    assert redact_text(f'write(3, "{key}\\n", 99) = 99') == f'write(3, "{R}\\n", 99) = 99'
    assert redact_env({"SETTING": key}) == {"SETTING": R}
    header = redact_command(f"python train.py {key} --epochs 3")
    assert header == f"python train.py {R} --epochs 3"


def _aws() -> tuple[str, str]:
    key_id = "AK" + "IA" + body(16, UPPER + "234567")
    secret = body(20, B64) + "/" + body(19, B64)
    return key_id, secret


def test_an_aws_secret_key_is_redacted_where_the_context_shows_it():
    key_id, secret = _aws()
    argv = ["aws", "configure", "set", key_id, secret]
    assert redact_argv(argv) == ["aws", "configure", "set", R, R]
    argv = ["aws", "configure", "set", "aws_secret_access_key", secret]
    assert redact_argv(argv)[-1] == R
    assert redact_text(f"keys {key_id} {secret}") == f"keys {R} {R}"
    # without the context it is 40 characters like any other
    sha = hashlib.sha1(b"x").hexdigest()
    assert redact_text(f"commit {sha} {key_id}") == f"commit {sha} {R}"  # hex stays, even here


def test_an_azure_client_secret_and_a_storage_connection_string_are_redacted():
    secret = body(3) + "8Q~" + body(34, ALNUM + "_~.-")
    assert redact_argv(["az", "login", "--service-principal", "-u", "app", secret])[-1] == R
    account_key = base64.b64encode(_RNG.randbytes(64)).decode()
    conn = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
    conn += f"{account_key};EndpointSuffix=core.windows.net"
    assert redact_text(conn) == conn.replace(account_key, R)


def test_a_pem_private_key_block_is_redacted_between_its_armour_lines():
    b64 = base64.b64encode(_RNG.randbytes(600)).decode()
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    for kind in ("RSA ", "EC ", "OPENSSH ", ""):
        begin, end = f"-----BEGIN {kind}PRIVATE" + " KEY-----", f"-----END {kind}PRIVATE KEY-----"
        pem = "\n".join([begin, *lines, end])
        out = redact_text(pem)
        assert out == f"{begin}{R}{end}" and b64[:64] not in out


@pytest.mark.parametrize(
    "url",
    [
        "postgres://trainer:{pw}@db.internal:5432/runs",
        "mysql://root:{pw}@10.0.0.5/app",
        "redis://:{pw}@cache:6379/0",
        "amqp://guest:{pw}@rabbit//",
        "https://oauth2:{pw}@gitlab.example.com/group/repo.git",
        "mongodb+srv://app:{pw}@cluster0.example.net/db?retryWrites=true",
    ],
)
def test_a_password_in_a_url_is_redacted_and_the_user_and_host_stay(url):
    pw = body(14)
    text = url.format(pw=pw)
    out = redact_text(text)
    assert out == url.format(pw=R)
    assert redact_argv(["psql", text]) == ["psql", out]


LOOK_ALIKES = [
    hashlib.md5(b"checkpoint").hexdigest(),
    hashlib.sha1(b"checkpoint").hexdigest(),  # and a git SHA
    hashlib.sha256(b"checkpoint").hexdigest(),
    "sha256:" + hashlib.sha256(b"layer").hexdigest(),  # a container image digest
    str(uuid.UUID(int=_RNG.getrandbits(128))),
    "GPU-" + str(uuid.UUID(int=_RNG.getrandbits(128))),
    "MIG-" + str(uuid.UUID(int=_RNG.getrandbits(128))),
    base64.b64encode(b"hello world, this is ordinary data").decode(),
    base64.b64encode(b"\x00\x01 step=1200 loss=1.234").decode(),
    "meta-llama/Llama-3-8B",
    "meta-llama/Meta-Llama-3.1-70B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "models--meta-llama--Llama-2-7b-hf",
    "/models/models--meta-llama--Llama-2-7b-hf/snapshots/" + hashlib.sha1(b"m").hexdigest(),
    "/home/alice/.cache/huggingface/hub/datasets--allenai--c4/blobs",
    "/opt/conda/envs/train/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "sk-learn",
    "task-runner-7f3a9c",
    "hf_transfer",
    "AKIA",
    "SKETCHY_FLAG_NAME_WITH_LETTERS",
    "1795338072.123",
    "0x00007f992be40f7b",
    "12345678901234567890123456789012",
    "2026-11-26T23:59:59.123456+00:00",
    "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64",
    "run-20240101_123456-3x9k2j1a",
    "eyJ",  # a prefix alone
]


@pytest.mark.parametrize("word", LOOK_ALIKES)
def test_look_alikes_stay_as_they_are(word):
    assert redact_text(word) == word
    assert (
        redact_text(f"python train.py --resume {word} --lr 3")
        == f"python train.py --resume {word} --lr 3"
    )
    assert redact_argv(["python", "train.py", word]) == ["python", "train.py", word]
    assert redact_env({"MODEL": word}) == {"MODEL": word}


@pytest.mark.parametrize(
    "raw",
    [
        b"trainer:" + body(12).encode(),  # user:password, as Basic auth carries it
        _RNG.randbytes(32),  # a generated key
        b"db_password=" + body(12).encode() + b" host=db",  # readable, but names a secret
    ],
)
def test_base64_of_a_secret_is_redacted_while_base64_of_plain_text_stays(raw):
    token = base64.b64encode(raw).decode()
    assert redact_argv(["app", "--blob", token]) == ["app", "--blob", R]
    plain = base64.b64encode(b"step 1200 of 5000, loss 1.234 on 8 ranks").decode()
    assert redact_argv(["app", "--blob", plain]) == ["app", "--blob", plain]
