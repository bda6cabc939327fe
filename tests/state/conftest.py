"""``provider``: each state provider that can be had here, as the topology config names it
(``topology.state.provider`` and its config), with data of its own per test: a named
memory store, a SQLite file, a Redis key prefix, a PostgreSQL table (the store tests'
locations; a server that is down skips with the reason)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tupletree.config import Config
from tupletree.store import Store, open_store
from tupletree.store.memory import forget

from ..store.conftest import LOCATIONS


@dataclass
class Provider:
    kind: str
    config: dict[str, Any]

    @property
    def conf(self) -> dict[str, Any]:
        """The topology config keys that select this provider."""
        return {
            Config.TOPOLOGY_STATE_PROVIDER: self.kind,
            Config.TOPOLOGY_STATE_PROVIDER_CONFIG: dict(self.config),
        }

    def open(self) -> Store:
        return open_store(self.kind, self.config)


def _memory(request: pytest.FixtureRequest) -> Iterator[Provider]:
    name = f"state-test-{uuid.uuid4().hex}"
    yield Provider("memory", {"name": name})
    forget(name)


def _durable(kind: str):
    def made(request: pytest.FixtureRequest) -> Iterator[Provider]:
        for location in LOCATIONS[kind](request):
            yield Provider(kind, dict(location.config))

    return made


PROVIDERS = {"memory": _memory, **{kind: _durable(kind) for kind in LOCATIONS}}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    yield from PROVIDERS[request.param](request)


@pytest.fixture(params=sorted(LOCATIONS))
def durable_provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    """The providers that survive their worker: SQLite, Redis, PostgreSQL."""
    yield from PROVIDERS[request.param](request)
