"""What counts as secret, in one place: setting names whose values are never shown, and the
userinfo of URLs.

Used wherever a value could be shown or leave the process: ``plan`` output, ``submit``'s
command line (secret values travel in an owner-only file instead), ``import-connector``,
and error messages (a client library may quote a bad value it was given).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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


# A URL's authority: after ``scheme://`` (or ``//``), up to the path, query or fragment, as
# urlsplit's netloc, read from the text itself so that a URL urlsplit refuses (a broken
# IPv6 literal, say) cannot slip its password past these functions.
_AUTHORITY = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//(?P<authority>[^/?#]*)")


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``url`` as (what comes before its userinfo, the userinfo, what comes after its
    ``@``), or None when it has none."""
    match = _AUTHORITY.match(url)
    if match is None or "@" not in match["authority"]:
        return None
    userinfo, _, host = match["authority"].rpartition("@")
    return url[: match.start("authority")], userinfo, host + url[match.end("authority") :]


def has_userinfo(url: str) -> bool:
    """Whether ``url`` holds a user (and maybe a password) before its host."""
    return _userinfo(url) is not None


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo (``user:pass@``) replaced."""
    found = _userinfo(url)
    if found is None:
        return url
    before, userinfo, after = found
    return f"{before}{userinfo.partition(':')[0]}:{REDACTED}@{after}"


def strip_userinfo(url: str) -> str:
    """``url`` without its userinfo (user and password), e.g. to carry a URL over into a
    file that must hold no credentials."""
    found = _userinfo(url)
    return url if found is None else found[0] + found[2]


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
