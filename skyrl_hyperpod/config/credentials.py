"""What training.jobs.runtime_env_vars refuses because it is a credential, by its name or by its value.

A plain variable's value is in the RayJob (its entrypoint or runtimeEnvYAML), in dist/, on the submitter's command
line, in Ray's job table and in the review gate's pull-request comment. A credential belongs in
training.jobs.secret_env: a Kubernetes Secret the Ray containers read through secretKeyRef (docs/security.md).

Values are checked with detect-secrets' detectors (https://github.com/Yelp/detect-secrets, `detect_secrets/plugins/`):
only their `analyze_string`, which matches text. Never `analyze_line` or `verify`: detect-secrets' verification sends
what it found to the service it belongs to (Slack's API, AWS STS). Beside them, the formats detect-secrets 1.5.0 does
not know (TOKEN_FORMATS) and long random-looking strings (`_random_looking`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

# A name that says it holds a credential. AWS_* too: the pods' AWS credentials come from their EKS Pod Identity
# roles, never from a variable. DATABASE_URL: the usual name of a connection string with its password
# (https://devcenter.heroku.com/articles/heroku-postgresql#connecting-in-python).
CREDENTIAL_ENV_NAME = re.compile(
    r"(.*_TOKEN|.*_KEY|.*APIKEY.*|.*_PAT|.*SECRET.*|.*PASS.*|.*CREDENTIAL.*|.*AUTH.*|AWS_.*|DATABASE_URL)",
    re.IGNORECASE,
)
CREDENTIAL_NAMES_SHOWN = "*_TOKEN, *_KEY, *APIKEY*, *_PAT, *SECRET*, *PASS*, *CREDENTIAL*, *AUTH*, AWS_*, DATABASE_URL"

# Token formats detect-secrets 1.5.0 has no detector for (its GitHub detector knows ghp_/gho_/ghu_/ghs_/ghr_ with
# 36 characters, its OpenAI detector only keys with the T3BlbkFJ marker, its Slack detector xox[abposr]- tokens of
# numbered parts), each by its documented prefix.
TOKEN_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # https://github.blog/2022-10-18-introducing-fine-grained-personal-access-tokens-for-github/
    ("a GitHub fine-grained token (github_pat_)", re.compile(r"github_pat_[A-Za-z0-9_]{20,}")),
    ("a GitHub token (gh[pousr]_)", re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}")),
    # https://huggingface.co/docs/hub/security-tokens: user access tokens start with hf_.
    ("a Hugging Face token (hf_)", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}")),
    # OpenAI's and Anthropic's API keys start with sk- (sk-proj-, sk-svcacct-, sk-ant-api03-, ...).
    ("an API key (sk-)", re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}")),
    # https://api.slack.com/concepts/token-types: xoxb-, xoxp-, xoxe-, xoxa-, ...
    ("a Slack token (xox?-)", re.compile(r"(?<![A-Za-z0-9])xox[a-z]-[A-Za-z0-9-]{10,}")),
)

# detect-secrets' default limit for base64 strings (its `Base64HighEntropyString`): bits per character above which a
# string looks random. A string of n characters has at most log2(n) bits per character, so only strings of 23 or more
# characters can pass it. Hex strings are left alone: commit ids and sha256 digests are ordinary values.
ENTROPY_LIMIT = 4.5
# A run of base64 or base64url characters, the alphabet random tokens are written in.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=_-]{23,}")
# A random token has a piece between separators of at least this many letters and digits that mixes upper case, lower
# case and digits; a path, an image or a model name ("/shared/models/Qwen3-VL-8B-Instruct") is made of short words.
MIN_MIXED_PIECE = 12
_SEPARATORS = re.compile(r"[+/=_-]")


@cache
def _detectors() -> tuple[RegexBasedDetector, ...]:
    # Imported on first use: detect-secrets takes ~0.3 s to import, and most configurations set no variable.
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    # Not its ArtifactoryDetector (any "AP" + a hex digit + 8 letters), IPPublicDetector (an address is no secret)
    # or the keyword and entropy plugins, which read source lines (`password = "..."`), not values.
    return (
        AWSKeyDetector(),
        AzureStorageKeyDetector(),
        BasicAuthDetector(),
        DiscordBotTokenDetector(),
        GitHubTokenDetector(),
        GitLabTokenDetector(),
        JwtTokenDetector(),
        MailchimpDetector(),
        NpmDetector(),
        OpenAIDetector(),
        PrivateKeyDetector(),
        PypiTokenDetector(),
        SendGridDetector(),
        SlackDetector(),
        SquareOAuthDetector(),
        StripeDetector(),
        TelegramBotTokenDetector(),
        TwilioKeyDetector(),
    )


@cache
def _base64_entropy() -> Base64HighEntropyString:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString(limit=ENTROPY_LIMIT)


def _mixed(piece: str) -> bool:
    return (
        len(piece) >= MIN_MIXED_PIECE
        and any(c.isupper() for c in piece)
        and any(c.islower() for c in piece)
        and any(c.isdigit() for c in piece)
    )


def _random_looking(value: str) -> Iterator[str]:
    for run in _BASE64_RUN.findall(value):
        if any(_mixed(piece) for piece in _SEPARATORS.split(run)) and (
            _base64_entropy().calculate_shannon_entropy(run) > ENTROPY_LIMIT
        ):
            yield run


def credential_in_value(value: str) -> str | None:
    """What kind of credential `value` holds ("a Hugging Face token (hf_)", "Basic Auth Credentials", ...), or None.
    The answer never quotes the value."""
    for kind, pattern in TOKEN_FORMATS:
        if pattern.search(value):
            return kind
    for detector in _detectors():
        if any(True for _ in detector.analyze_string(value)):
            return f"{detector.secret_type}, by detect-secrets"
    if any(True for _ in _random_looking(value)):
        return f"a long random-looking string (over {ENTROPY_LIMIT} bits per character)"
    return None
