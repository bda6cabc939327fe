"""The Host, Origin and token rules both services apply (tupletree.http_guard), with
plain header values; tests/ui/test_security.py and tests/drpc/test_server_hostile.py
show them on the live services."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.http_guard import (
    HostPolicy,
    check_allowed_hosts,
    check_token,
    foreign_origin,
    host_name,
    same_origin,
    token_matches,
)

POLICY = HostPolicy(["dashboard.example", ".corp.example"], names=["box", "box.lan"])


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "127.0.0.1",
        "[::1]:8080",
        "10.1.2.3:8080",
        "localhost:8080",
        "LOCALHOST",
        "localhost.:8080",
        "app.localhost:8080",
        "box:8080",
        "box.lan.",
        "dashboard.example:443",
        "corp.example",
        "a.b.corp.example:8080",
    ],
)
def test_hosts_this_service_answers_to(host):
    assert POLICY.allows(host)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8080",
        "localhost.attacker.example",
        "localhost.attacker.example:8080",
        "127.0.0.1.attacker.example",
        "box.attacker.example",
        "xbox",
        "dashboard.example.attacker.example",
        "notcorp.example",
        "",
        None,
        "user@127.0.0.1",
        "127.0.0.1/path",
        "127.0.0.1:notaport",
        "127.0.0.1:99999",
    ],
)
def test_hosts_it_refuses(host):
    """A rebound name (evil.example), names that merely start like an allowed one
    (localhost.attacker.example: the audit's surviving mutant), and things that are not
    a host at all."""
    assert not POLICY.allows(host)


def test_the_machine_names_are_allowed_by_default():
    import socket

    assert HostPolicy().allows(f"{socket.gethostname()}:8080")


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://127.0.0.1:8080", "127.0.0.1:8080", True),
        ("http://localhost", "localhost:80", True),
        ("http://127.0.0.1:9090", "127.0.0.1:8080", False),  # another local port
        ("http://localhost:8080", "127.0.0.1:8080", False),
        ("https://127.0.0.1:8080", "127.0.0.1:8080", True),  # a TLS proxy in front
        ("https://ui.example.com", "ui.example.com", True),
        ("https://ui.example.com", "ui.example.com:80", False),
        ("http://evil.example", "127.0.0.1:8080", False),
        ("null", "127.0.0.1:8080", False),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080", False),
        ("http://127.0.0.1:bad", "127.0.0.1:8080", False),
    ],
)
def test_same_origin(origin, host, same):
    assert same_origin(origin, host) is same


def test_foreign_origin_names_the_page_and_reads_fetch_metadata():
    assert foreign_origin({}, "127.0.0.1:1") is None
    assert foreign_origin({"Origin": "http://127.0.0.1:1"}, "127.0.0.1:1") is None
    assert foreign_origin({"Sec-Fetch-Site": "same-origin"}, "127.0.0.1:1") is None
    assert "http://127.0.0.1:2" in foreign_origin({"Origin": "http://127.0.0.1:2"}, "127.0.0.1:1")
    assert "same-site" in foreign_origin({"Sec-Fetch-Site": "same-site"}, "127.0.0.1:1")
    assert "cross-site" in foreign_origin({"Sec-Fetch-Site": "cross-site"}, "127.0.0.1:1")


def test_tokens_are_checked_without_showing_them():
    secret = "s3cr3t-but-short"
    assert check_token("t", None) is None
    assert check_token("t", "a" * 16) == "a" * 16
    for bad, message in (
        ("short", "16 to 512 characters, got one of 5"),
        ("x" * 513, "got one of 513"),
        ("has a space in it ok", "visible ASCII"),
        ("é" * 20, "visible ASCII"),
        (12345678901234567, "must be a str, got int"),
    ):
        with pytest.raises(ValueError, match=message) as info:
            check_token("the web view's token", bad)
        assert str(bad) not in str(info.value) or bad == 12345678901234567
    with pytest.raises(ValueError) as info:
        check_token("t", secret[:10])
    assert secret[:10] not in str(info.value)


def test_token_matches_only_a_bearer_header_with_that_token():
    token = "k" * 32
    assert token_matches(token, f"Bearer {token}")
    assert token_matches(token, f"bearer   {token} ")
    for header in (None, "", token, f"Basic {token}", f"Bearer {token}x", "Bearer ", "Bearer é"):
        assert not token_matches(token, header)


@given(st.text(max_size=60))
def test_host_name_never_raises(text):
    """Whatever a client puts in Host: a name or None, never an exception."""
    name = host_name(text)
    assert name is None or (name == name.lower() and not name.endswith("."))
    POLICY.allows(text)


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ("dashboard.example", "must be a list"),
        ([""], "non-empty str"),
        (["http://x.example"], "not a host name"),
        (["x.example:8080"], "not a host name"),
        ([5], "non-empty str"),
        (["a"] * 300, "at most 256"),
    ],
)
def test_bad_allowed_hosts_are_refused_naming_the_entry(hosts, message):
    with pytest.raises(ValueError, match=message):
        check_allowed_hosts("allowed_hosts", hosts)
