"""Credentials never shown: every form a client library accepts is masked in the
address, and the secret itself is scrubbed from free text that quotes it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.redact import redact, scrub, secrets

CASES = [
    ("amqp://guest:s3cr3t@127.0.0.1:5672/%2F", "amqp://guest:***@127.0.0.1:5672/%2F", "s3cr3t"),
    ("nats://T0KEN@127.0.0.1:4222", "nats://***@127.0.0.1:4222", "T0KEN"),
    ("nats://u:pw1@h:4222,nats://T2@h2:4222", "nats://u:***@h:4222,nats://***@h2:4222", "T2"),
    (
        "redis://127.0.0.1:6379/0?password=hunter2&db=0",
        "redis://127.0.0.1:6379/0?password=***&db=0",
        "hunter2",
    ),
    ("redis://:pw9@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0", "pw9"),
    ("user:pw8@127.0.0.1:6379", "user:***@127.0.0.1:6379", "pw8"),
    ("host=db user=me password=s3cret dbname=x", "host=db user=me password=*** dbname=x", "s3cret"),
    ("host=db password='a b\\' c' port=5432", "host=db password=*** port=5432", "a b\\' c"),
    (
        "postgresql://me:p%40ss@db/x?sslpassword=zz9",
        "postgresql://me:***@db/x?sslpassword=***",
        "p@ss",
    ),
]


@pytest.mark.parametrize(("address", "shown", "secret"), CASES)
def test_every_credential_form_is_masked(address, shown, secret) -> None:
    assert redact(address) == shown
    assert secret in secrets(address)
    assert secret not in redact(address)


def test_what_is_not_a_secret_is_kept() -> None:
    """A user name, a host and a Kafka bootstrap list are shown as they are."""
    for address in ("redis://user@127.0.0.1:6379/0", "127.0.0.1:9092,127.0.0.1:9093"):
        assert redact(address) == address
        assert secrets(address) == set()


def test_scrub_removes_secrets_a_client_library_quoted() -> None:
    """An exception text that quotes the URL, decoded or not, loses the secret."""
    address = "amqp://guest:p%40ss@host/"
    text = "cannot connect to amqp://guest:p%40ss@host/ (password p@ss refused)"
    assert "p@ss" not in scrub(text, secrets(address))
    assert "p%40ss" not in scrub(text, secrets(address))


_PASSWORDS = st.text(
    alphabet=st.characters(
        codec="ascii", categories=["L", "N", "P", "S"], exclude_characters="@:/?#&=%,'\\[]"
    ),
    min_size=1,
    max_size=30,
)
FORMS = [
    "amqp://u:{}@h:5672/",
    "redis://h:6379/0?password={}&db=1",
    "host=h user=u password={} dbname=d",
    "nats://{}@h:4222",
    "rediss://:{}@h:6380/0",
]


@given(password=_PASSWORDS)
def test_any_password_is_masked_in_every_form(password) -> None:
    """Whatever the password, each form shows exactly the address with *** for it."""
    for form in FORMS:
        assert redact(form.format(password)) == form.format("***")
        assert password in secrets(form.format(password))
