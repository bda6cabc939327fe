"""Who may talk to tupletree's HTTP services: the Host a request names, the page it came
from, and an optional token. Pure functions of header values; both services use them
(``ui/app.py`` on every request, ``drpc/server.py`` on its endpoints).

The rules (docs/security.md tells the trust boundaries around them):

- Host, on every bind. A page on ``evil.example`` whose name an attacker re-points at
  this machine (DNS rebinding) makes the browser send ``Host: evil.example``: refused.
  Allowed: an IP literal (a request that names no name cannot be rebound), ``localhost``
  and names under ``.localhost`` (browsers resolve those to loopback themselves), this
  machine's names (host name, fully qualified name, each without and with a trailing
  dot), and the names a user lists (``allowed_hosts``: ``name`` exactly, ``.name`` for
  the name and every name under it). ``localhost.attacker.example`` is none of these.
- Origin. A browser page names its origin in ``Origin`` (and ``Sec-Fetch-Site``); a
  request whose origin is not this service's own (another site, ``null``, or another
  port of this very host) is refused, whatever its method: such a page may neither
  steer the service nor read it. Scripts (curl, the CLI, Prometheus) send neither.
- Token. When one is set, ``Authorization: Bearer <token>`` must carry it (compared in
  constant time). A token is 16 to 512 visible ASCII characters; a bad one is refused
  naming its length, never its text.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

MIN_TOKEN_CHARS = 16
MAX_TOKEN_CHARS = 512
MAX_ALLOWED_HOSTS = 256
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")


def host_name(host_header: str | None) -> str | None:
    """The name or address a ``Host`` header names, lowercased, without its port, its
    IPv6 brackets or a trailing dot; None if it is not a host at all."""
    if not host_header:
        return None
    try:
        parts = urlsplit(f"//{host_header}")
        name = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return None
    if not name or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    name = name.lower().rstrip(".")
    if not name or not (set(name) <= _NAME_CHARS or is_ip_literal(name)):
        return None  # percent signs, spaces, other scripts: not a name DNS could give
    return name


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@functools.cache
def machine_names() -> frozenset[str]:
    """This machine's own names (looked up once: getfqdn may ask DNS)."""
    names = {"localhost"}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower().rstrip("."))
    return frozenset(names)


def check_allowed_hosts(what: str, hosts: object) -> tuple[str, ...]:
    """A user's list of host names (``name`` or ``.name``), checked; ValueError naming
    the offending entry."""
    if isinstance(hosts, str) or not isinstance(hosts, Iterable):
        raise ValueError(f"{what} must be a list of host names, got {hosts!r}")
    out = []
    for entry in hosts:
        if not isinstance(entry, str) or not entry.strip("."):
            raise ValueError(f"{what}: a host name must be a non-empty str, got {entry!r}")
        name = entry.lower().rstrip(".")
        bare = name.strip("[]")
        if not (is_ip_literal(bare) or set(name) <= _NAME_CHARS):
            raise ValueError(
                f"{what}: {entry!r} is not a host name (letters, digits, '-' and '.'; a "
                "leading '.' allows every name under it; no port, scheme or path)"
            )
        out.append(bare if is_ip_literal(bare) else name)
        if len(out) > MAX_ALLOWED_HOSTS:
            raise ValueError(f"{what}: at most {MAX_ALLOWED_HOSTS} host names")
    return tuple(out)


class HostPolicy:
    """Which ``Host`` headers a service answers (module docstring)."""

    def __init__(self, allowed: Iterable[str] = (), names: Iterable[str] | None = None) -> None:
        allowed = check_allowed_hosts("allowed_hosts", allowed)
        self.names = frozenset(machine_names() if names is None else names) | {
            a for a in allowed if not a.startswith(".")
        }
        self.suffixes = (*(a for a in allowed if a.startswith(".")), ".localhost")

    def allows(self, host_header: str | None) -> bool:
        name = host_name(host_header)
        if name is None:
            return False
        if is_ip_literal(name) or name in self.names:
            return True
        return any(name.endswith(s) or name == s[1:] for s in self.suffixes)


def foreign_origin(headers: Mapping[str, str], host_header: str | None) -> str | None:
    """Why a request comes from a browser page of another origin (None: it does not)."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site.lower() in ("cross-site", "same-site"):
        return f"a page from another origin ({site}) may not use this service"
    origin = headers.get("Origin")
    if origin is None:
        return None
    if not same_origin(origin, host_header):
        return f"a page from {origin[:200]} may not use this service"
    return None


def same_origin(origin: str, host_header: str | None) -> bool:
    """``Origin`` is ``http://`` + the very host and port of ``Host``."""
    default = {"http": 80, "https": 443}
    try:
        o = urlsplit(origin)
        if o.scheme not in default:
            return False
        o_port = o.port or default[o.scheme]
        h = urlsplit(f"//{host_header or ''}")
        h_port = h.port or default[o.scheme]  # (a TLS proxy in front: 443)
    except ValueError:
        return False
    if o.path not in ("", "/") or o.query or o.username is not None:
        return False
    o_name, h_name = (o.hostname or "").rstrip("."), (h.hostname or "").rstrip(".")
    return bool(o_name) and o_name == h_name and o_port == h_port


def check_token(what: str, token: object) -> str | None:
    """A token a user configured (None: no token), checked; ValueError naming ``what``
    and the token's length, never its text."""
    if token is None:
        return None
    if not isinstance(token, str):
        raise ValueError(f"{what} must be a str, got {type(token).__name__}")
    if not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS:
        raise ValueError(
            f"{what} must have {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} characters, got one "
            f"of {len(token)} (make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    if not all("!" <= c <= "~" for c in token):
        raise ValueError(
            f"{what} must be visible ASCII characters (no spaces), got one of {len(token)} "
            "characters that is not"
        )
    return token


def bearer(token: str) -> dict[str, str]:
    """The header that carries ``token``."""
    return {"Authorization": f"Bearer {token}"}


def token_matches(token: str, authorization: str | None) -> bool:
    """``authorization`` (the header's value) carries ``token``."""
    if not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode("utf-8"))
