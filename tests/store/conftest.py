"""One fixture, ``store``, that runs each contract test on every backend that can be had
here (a backend whose server is down skips with the reason)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tupletree.store import Store
from tupletree.store.memory import MemoryStore, forget


def _memory(request: pytest.FixtureRequest) -> Iterator[Store]:
    name = f"test-{uuid.uuid4().hex}"
    yield MemoryStore(name)
    forget(name)


# backend -> a generator of an open store (the SQLite, Redis and PostgreSQL backends
# add theirs as they land)
OPENERS: dict[str, Callable[[pytest.FixtureRequest], Iterator[Store]]] = {
    "memory": _memory,
}


@pytest.fixture(params=sorted(OPENERS))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    opened = OPENERS[request.param](request)
    s = next(opened)
    try:
        yield s
    finally:
        s.close()
        next(opened, None)
