"""The catalogue of credentials that carry their issuer's prefix: found by shape alone.

A key passed as a bare argument (`train.py ... AKIA...`), pasted into a config value or
printed in a log line has no name to give it away, but most issuers now mint keys with a
fixed prefix and length precisely so that scanners can find them. The formats here follow
the issuers' documentation and the public catalogues of secret scanners (gitleaks' rules,
detect-secrets' plugins), kept to those whose prefix is specific enough that ordinary text
on a GPU node (paths, hashes, kernel names, model names) never matches: a prefix of three
or more characters with a separator, or a long fixed-alphabet body. Keys without a prefix
(a W&B key is 40 hex digits, an Azure OpenAI key 32) are found by their name only
(names.py), or, when random-looking, by the entropy rule (formats.py), which also holds the
formats that need more than a prefix (AWS secret keys beside their key id, Azure AD client
secrets, PEM private key blocks, webhook URLs).

All formats are one compiled regular expression. It is cheap because a match can only
start at a character that some format starts with (a lookahead on that set rejects every
other position at once) and never in the middle of a longer token.
"""

from __future__ import annotations

import re

_B64 = "A-Za-z0-9+/"
_URL64 = "A-Za-z0-9_\\-"

KEY_FORMATS: tuple[tuple[str, str], ...] = (
    # cloud providers
    (
        "AWS access key id",
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA"
        r"|A3T[A-Z0-9])[A-Z0-9]{16}",
    ),
    ("AWS Bedrock API key", rf"ABSK[{_B64}]{{100,}}={{0,2}}"),
    ("Google API key", rf"AIza[{_URL64}]{{35}}"),
    ("Google OAuth access token", rf"ya29\.[{_URL64}]{{20,}}"),
    ("Google OAuth client secret", rf"GOCSPX-[{_URL64}]{{20,}}"),
    ("Alibaba Cloud access key id", r"LTAI[A-Za-z0-9]{20}"),
    ("DigitalOcean token", r"do[opr]_v1_[0-9a-f]{64}"),
    ("Heroku API key", rf"HRKU-AA[{_URL64}]{{58}}"),
    ("Fly.io token", rf"(?:fo1_[{_URL64}]{{43}}|fm[12][ar]?_[{_B64}]{{100,}}={{0,3}})"),
    ("Vault token", rf"hv[sb]\.[{_URL64}]{{90,}}"),
    ("Doppler token", r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("Pulumi token", r"pul-[0-9a-f]{40}"),
    ("Databricks token", r"dapi[0-9a-f]{32}(?:-\d)?"),
    ("PlanetScale token", rf"pscale_(?:tkn|oauth|pw)_[{_URL64}.=]{{32,64}}"),
    ("OpenShift token", rf"sha256~[{_URL64}]{{43}}"),
    # code hosting and packages
    ("GitHub token", r"gh[pousr]_[0-9A-Za-z]{30,}"),
    ("GitHub fine-grained token", r"github_pat_[0-9A-Za-z_]{22,}"),
    ("GitLab token", rf"gl(?:pat|dt|ptt|rt|soat|cbt|ft|ffct|imt|oas|agent)-[{_URL64}.]{{20,}}"),
    ("GitLab runner registration token", rf"GR1348941[{_URL64}]{{20,}}"),
    ("npm token", r"npm_[0-9A-Za-z]{36}"),
    ("PyPI token", rf"pypi-AgE[{_URL64}]{{50,}}"),
    ("RubyGems token", r"rubygems_[0-9a-f]{48}"),
    ("Artifactory key", r"AKCp[A-Za-z0-9]{69}"),
    ("Atlassian token", rf"ATATT3[{_URL64}=]{{150,}}"),
    # AI and ML services
    ("OpenAI or Anthropic key", rf"sk-(?:ant-|proj-|svcacct-|admin-|or-)?[{_URL64}]{{20,}}"),
    ("Hugging Face token", r"(?:hf_|api_org_)[0-9A-Za-z]{30,}"),
    ("Replicate token", r"r8_[0-9A-Za-z]{37}"),
    ("Groq key", r"gsk_[0-9A-Za-z]{48,}"),
    ("xAI key", r"xai-[0-9A-Za-z]{60,}"),
    ("Perplexity key", r"pplx-[0-9A-Za-z]{40,}"),
    ("LangSmith key", r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}"),
    ("Pinecone key", r"pcsk_[0-9A-Za-z_]{40,}"),
    ("Together key", r"tgp_v1_[0-9A-Za-z_\-]{40,}"),
    ("Cerebras key", r"csk-[0-9a-z]{40,}"),
    # chat, mail and payments
    ("Slack token", r"xox[abposre]-[0-9A-Za-z\-]{10,}|xoxe\.xox[bp]-[0-9A-Za-z\-]{10,}"),
    ("Slack app token", r"xapp-\d-[0-9A-Za-z\-]{10,}"),
    ("Stripe key", r"(?:sk|rk)_(?:live|test|prod)_[0-9A-Za-z]{10,}|whsec_[0-9A-Za-z]{20,}"),
    ("Square token", rf"(?:EAAA|sq0atp-|sq0csp-)[{_URL64}]{{22,60}}"),
    ("SendGrid key", rf"SG\.[{_URL64}]{{16,}}\.[{_URL64}]{{16,}}"),
    ("Sendinblue key", r"xkeysib-[0-9a-f]{64}-[0-9A-Za-z]{16}"),
    ("Twilio API key", r"SK[0-9a-fA-F]{32}"),
    ("Shopify token", r"shp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}"),
    ("Shippo token", r"shippo_(?:live|test)_[0-9a-fA-F]{40}"),
    # observability and tooling
    ("Grafana token", r"glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ("Sentry token", r"sntry[us]_[A-Za-z0-9+/=_]{40,}"),
    ("New Relic key", r"NR(?:AK|JS|II)-[0-9A-Za-z\-]{19,32}"),
    ("Dynatrace token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ("Postman key", r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    ("Linear key", r"lin_api_[0-9A-Za-z]{40}"),
    ("Notion token", r"(?:ntn_|secret_)[0-9A-Za-z]{43,}"),
    ("Prefect key", r"pnu_[0-9A-Za-z]{36}"),
    ("Infracost key", r"ico-[0-9A-Za-z]{32}"),
    ("Typeform token", r"tfp_[0-9A-Za-z_\-.=]{59}"),
    ("Frame.io token", r"fio-u-[0-9A-Za-z_\-=]{64}"),
    ("EasyPost key", r"EZ[AT]K[0-9A-Za-z]{54}"),
    ("1Password token", r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    ("age secret key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    # structured tokens
    ("JWT", rf"eyJ[{_URL64}]{{8,}}\.eyJ[{_URL64}]{{8,}}\.[{_URL64}]*"),
    ("JWT (any header)", rf"eyJ[{_URL64}]{{8,}}\.[{_URL64}]{{8,}}\.[{_URL64}]{{8,}}"),
    ("base64 of a JSON object", rf"eyJ[{_B64}_\-]{{60,}}={{0,2}}"),
)
"""(what it is, its pattern): every format found by shape. A test builds an example of
each and checks that it is redacted wherever it stands."""

_NOT_INSIDE = r"(?<![A-Za-z0-9_\-])"  # never in the middle of a longer token


def _first_chars() -> str:
    """The characters a match may start with (a lookahead on them rejects other positions
    before any format is tried). Every alternative starts with a literal character; a
    character too many (from a `|` inside a group) only costs a little speed."""
    chars: set[str] = set()
    for _, pattern in KEY_FORMATS:
        for alt in pattern.split("|"):
            alt = alt.lstrip("(?:")
            if alt:
                chars.add(alt[0])
    return "".join(sorted(re.escape(c) for c in chars))


KEYS = re.compile(
    _NOT_INSIDE
    + f"(?=[{_first_chars()}])"
    + "(?:"
    + "|".join(f"(?:{p})" for _, p in KEY_FORMATS)
    + ")"
)
"""Every format of KEY_FORMATS as one regular expression."""
