"""What counts as secret, in one place: setting names whose values are never shown, and the
userinfo of URLs.

Used wherever a value could be shown or leave the process: ``plan`` output, ``submit``'s
command line (secret values travel in an owner-only file instead), ``import-connector``,
and error messages (a client library may quote a bad value it was given).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"

# Matched against a name lowercased with '_' and '-' read as '.': librdkafka properties
# (sasl.password, ssl.key.password, ssl.keystore.password, ssl.key.pem, sasl.jaas.config,
# sasl.oauthbearer.client.secret, sasl.oauthbearer.config), Connect settings
# (aws.secret.access.key, connect.s3.aws.secret.key, basic.auth.user.info) and environment
# names (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), and SSE-C keys (s3.sse.customer.key).
_SECRET_NAME = re.compile(
    r"password|passwd|secret|token|credential|jaas|sasl\.oauthbearer\.config"
    r"|(^|\.)key\.pem$|ssl\.key\.(?!location$)|private\.key|customer\.key|user\.info"
    r"|access\.key"
)


def _normal(name: str) -> str:
    return name.lower().replace("_", ".").replace("-", ".")


def is_secret(name: str) -> bool:
    """Whether the value of the setting or property ``name`` must never be shown."""
    return _SECRET_NAME.search(_normal(name)) is not None


def has_userinfo(url: str) -> bool:
    """Whether ``url`` holds a user (and maybe a password) before its host."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo (``user:pass@``) replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{host}"))


def redact_value(name: str, value: str) -> str:
    """The value of setting ``name`` as it may be shown."""
    if is_secret(name):
        return REDACTED
    return redact_url(value) if "://" in value else value


_KNOWN: set[str] = set()


def remember(values: Iterable[str]) -> None:
    """Note the secret values of this process's settings, for :func:`scrub`."""
    _KNOWN.update(v for v in values if len(v) >= 3)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every occurrence of each secret value (``secrets`` and those
    remembered) replaced: for messages that quote what a library was given."""
    every = _KNOWN.union(s for s in secrets if len(s) >= 3)
    for secret in sorted(every, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
