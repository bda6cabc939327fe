"""What of an address a store shows: never the password (store/redact.py)."""

from __future__ import annotations

import pytest

from tupletree.store.redact import redact_url, scrub, url_password


@pytest.mark.parametrize(
    ("url", "shown", "password"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", None),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0", "pw"),
        ("redis://user:p%40ss@h/1", "redis://user:***@h/1", "p%40ss"),
        ("rediss://u@h/0", "rediss://u@h/0", None),
        ("redis://h/0?password=pw&db=2", "redis://h/0?password=***&db=2", "pw"),
        ("unix:///tmp/r.sock?db=0&password=pw", "unix:///tmp/r.sock?db=0&password=***", "pw"),
        ("redis://[::1", "<an address not shown", None),
        ("user:pw@h:6379", "<an address not shown", None),  # no scheme: 'user' is one
        ("http://u:pw@h/0", "<an address not shown", "pw"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str, password: str | None) -> None:
    assert redact_url(url).startswith(shown)
    assert url_password(url) == password
    if password:
        assert password not in redact_url(url).replace("password", "")


def test_scrub_removes_each_known_secret() -> None:
    assert scrub("auth pw1 failed for pw2", ["pw1", None, "pw2"]) == "auth *** failed for ***"
    assert scrub("nothing to hide", [None, ""]) == "nothing to hide"
