"""A store whose client library is not installed names the extra that brings it (the
clients are extras: pyproject.toml, tupletree/extras.py); the store package itself
imports without either."""

from __future__ import annotations

import sys

import pytest

from tests.store.conftest import PG_DSN, REDIS_URL
from tupletree.extras import MissingExtraError
from tupletree.store import open_store


@pytest.mark.parametrize(
    ("kind", "config", "client", "module", "extra"),
    [
        ("postgresql", {"dsn": PG_DSN}, "psycopg", "tupletree.store.postgres", "postgresql"),
        ("redis", {"url": REDIS_URL}, "redis", "tupletree.store.redis", "redis"),
    ],
)
def test_without_its_client_a_store_names_the_extra(
    kind, config, client, module, extra, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, client, None)  # what Python does for a missing package
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtraError, match=rf"pip install 'tupletree\[{extra}\]'") as err:
        open_store(kind, config)
    assert err.value.extra == extra
