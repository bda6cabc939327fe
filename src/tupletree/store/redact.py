"""What of a store's address may be shown: no password, ever.

A store's ``name``, its errors and its logs show the backend and where it is. A URL
(``redis://user:pw@host/0``) or a PostgreSQL DSN (URL or ``key=value`` form) may carry a
password, in the user part or as a parameter (``?password=``, ``password=``): these
functions drop it, and ``scrub`` removes a known secret from any text a client library
produced (its error messages), in case one quotes it. Pure functions, no I/O.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

HIDDEN = "***"
_UNSHOWN = "<an address not shown (it may hold a password)>"
_SCHEMES = frozenset({"redis", "rediss", "unix", "postgres", "postgresql"})

# parameters that carry a secret in Redis URLs and libpq connection strings
_SECRET_PARAMS = frozenset({"password", "pass", "passwd", "sslpassword", "token", "secret"})


def url_password(url: str) -> str | None:
    """The password a URL carries (user part or ``?password=``), or None."""
    try:
        parts = urlsplit(url)
        if parts.password:
            return parts.password
        for k, v in parse_qsl(parts.query):
            if k.lower() in _SECRET_PARAMS and v:
                return v
    except ValueError:
        return None
    return None


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (user part and secret parameters);
    a placeholder for anything that is not a Redis or PostgreSQL URL (whose parts this
    cannot tell apart: ``user:pw@host`` parses as the scheme ``user``)."""
    try:
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            return _UNSHOWN
        netloc = parts.netloc
        if parts.password is not None:
            host = netloc.rsplit("@", 1)[1]
            netloc = f"{parts.username or ''}:{HIDDEN}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, HIDDEN if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*"
            )
        # by hand: urlunsplit drops the '//' of an empty netloc (unix:///path); the
        # fragment, never used by these URLs, is not shown
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        return _UNSHOWN


def scrub(text: str, secrets: list[str | None]) -> str:
    """``text`` with every occurrence of each secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, HIDDEN)
    return text
