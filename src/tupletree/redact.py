"""Credentials out of everything tupletree shows: errors, ``errors()``, REST, logs.

An address a user configures can carry a secret in every form its client library
accepts, and each must be caught:

- URL userinfo: ``amqp://user:PASSWORD@host``, ``redis://:PASSWORD@host``, and the
  same without a scheme (``user:PASSWORD@host:6379``);
- a bare userinfo that is a token: ``nats://TOKEN@host`` (NATS's token auth; other
  schemes read a bare userinfo as a user name, which is kept);
- query parameters: ``redis://host/0?password=PASSWORD``, ``...?sslpassword=``,
  ``?token=``, ``?secret=``, any name containing "pass", "pwd", "token", "secret" or
  "key";
- key=value connection strings (libpq's DSN): ``host=db password=PASSWORD``, quoted
  values included;
- comma-separated lists of any of these (NATS servers).

``redact(address)`` gives the address with each secret replaced by ``***``;
``secrets(address)`` the secrets themselves (raw and percent-decoded), so that free
text a client library produced (an exception's message that quotes the URL) can be
``scrub``-bed of them. Below every layer (standard library only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

MASK = "***"
_TOKEN_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})
_SECRET_NAME = re.compile(r"pass|pwd|token|secret|key", re.IGNORECASE)
# libpq keyword/value pairs: key=value or key='quoted \' value'
_DSN_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def _is_url(text: str) -> bool:
    return "://" in text


def _is_bare_netloc(text: str) -> bool:
    """``user:pw@host:port`` without a scheme (redis-py and others accept it)."""
    return "@" in text and not any(c in text.split("@")[0] for c in "= \t")


def _url_secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found = []
    if parts.password:
        found.append(parts.password)
    elif parts.username and parts.scheme.lower() in _TOKEN_SCHEMES:
        found.append(parts.username)
    for name, value in _query_pairs(parts.query):
        if _SECRET_NAME.search(name) and value:
            found.append(value)
    return found


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """The query's (name, raw value) pairs: raw, so the secret is found as written."""
    return [
        (pair.split("=", 1)[0], pair.split("=", 1)[1] if "=" in pair else "")
        for pair in query.split("&")
        if pair
    ]


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if parts.password is not None:
            userinfo = f"{parts.username or ''}:{MASK}"
        elif parts.scheme.lower() in _TOKEN_SCHEMES:
            userinfo = MASK
        netloc = f"{userinfo}@{host}"
    query = "&".join(
        f"{name}={MASK if _SECRET_NAME.search(name) else value}"
        for name, value in _query_pairs(parts.query)
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _dsn_secrets(dsn: str) -> list[str]:
    return [value.strip("'") for name, value in _DSN_PAIR.findall(dsn) if _SECRET_NAME.search(name)]


def _redact_dsn(dsn: str) -> str:
    def mask(m: re.Match[str]) -> str:
        return f"{m.group(1)}={MASK}" if _SECRET_NAME.search(m.group(1)) else m.group(0)

    return _DSN_PAIR.sub(mask, dsn)


def redact(address: str) -> str:
    """``address`` with every credential replaced by ``***``; an address that cannot be
    parsed is not shown at all."""
    if not isinstance(address, str):
        return "<address>"
    out = []
    for item in address.split(","):
        try:
            if _is_url(item):
                out.append(_redact_url(item))
            elif _is_bare_netloc(item):
                out.append(_redact_url("//" + item)[2:])
            else:
                out.append(_redact_dsn(item))
        except ValueError:
            out.append("<unparsable address>")
    return ",".join(out)


def secrets(*addresses: str | None) -> set[str]:
    """The secrets ``addresses`` carry, raw and percent-decoded (for ``scrub``)."""
    found: set[str] = set()
    for address in addresses:
        if not isinstance(address, str):
            continue
        for item in address.split(","):
            try:
                if _is_url(item):
                    raw = _url_secrets(item)
                elif _is_bare_netloc(item):
                    raw = _url_secrets("//" + item)
                else:
                    raw = _dsn_secrets(item)
            except ValueError:
                raw = [item]  # unparsable: the whole item may be a secret
            for s in raw:
                found.update({s, unquote(s), unquote_plus(s)})
    return {s for s in found if s}


def scrub(text: str, hidden: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``hidden`` replaced by ``***``
    (longest first, so a secret that contains another is masked whole)."""
    for s in sorted(hidden, key=len, reverse=True):
        text = text.replace(s, MASK)
    return text
