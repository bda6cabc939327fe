"""SharedList: state a test shares with the copies of its components, in any process.

Components are copied per task (pickled), and on SparkCluster the copies run in other
processes (Spark's Python workers). A helper that a test reads or writes while the
topology runs (a FeederSpout's queue, an AckFailTracker's ids, captured emits, a test's
journal) keeps its state in a SharedList: a list held by the process that created it.

- In that process every copy uses the list itself (LocalCluster: no I/O at all).
- In other processes a copy reaches it through a ``multiprocessing`` manager, served
  from a daemon thread of the owning process. It binds 127.0.0.1 (so SparkCluster's
  helpers need executors on the test's machine: a ``local[...]`` master), and every
  connection must pass multiprocessing's HMAC challenge, keyed with a random secret,
  before anything it sends is unpickled. The secret travels inside the pickled helper,
  that is with the topology through Spark, never over the manager's socket.

A list lives while any handle to it in the owning process does; a copy elsewhere that
outlives them gets a clear error naming the list. Nothing is bounded beyond what the test
itself puts in: these are test helpers.
"""

from __future__ import annotations

import os
import secrets
import threading
import uuid
import weakref
from multiprocessing.managers import BaseManager
from typing import Any

__all__ = ["SharedList"]


class _Entry:
    """The list and its lock, in the owning process: the one implementation of the
    operations, used directly by local handles and through ``_Store`` by remote ones."""

    __slots__ = ("__weakref__", "_items", "_lock")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._lock = threading.Lock()

    def append(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)

    def pop_first(self) -> tuple[bool, Any]:
        with self._lock:
            if not self._items:
                return False, None
            return True, self._items.pop(0)

    def items(self) -> list[Any]:
        with self._lock:
            return list(self._items)


# The owning process's lists, by key; handles hold their entry, so it lives while they do.
_entries: weakref.WeakValueDictionary[str, _Entry] = weakref.WeakValueDictionary()


def _entry(key: str) -> _Entry:
    entry = _entries.get(key)
    if entry is None:
        raise LookupError(
            f"shared list {key} is gone: the test that made it has dropped every handle to it"
        )
    return entry


class _Store:
    """What the manager serves: the owning process's lists, by key."""

    def append(self, key: str, item: Any) -> None:
        _entry(key).append(item)

    def pop_first(self, key: str) -> tuple[bool, Any]:
        return _entry(key).pop_first()

    def items(self, key: str) -> list[Any]:
        return _entry(key).items()


_STORE = _Store()


class _Manager(BaseManager):
    pass


_Manager.register("store", callable=lambda: _STORE)

# This process's server, started the first time a list is pickled: (address, authkey).
_server_lock = threading.Lock()
_server: tuple[tuple[str, int], bytes] | None = None


def _serve() -> tuple[tuple[str, int], bytes]:
    global _server
    with _server_lock:
        if _server is None:
            authkey = secrets.token_bytes(32)
            server = _Manager(address=("127.0.0.1", 0), authkey=authkey).get_server()
            threading.Thread(
                target=server.serve_forever, name="tupletree-testing-shared", daemon=True
            ).start()
            address = server.address
            assert isinstance(address, tuple)  # a TCP server: (host, port)
            _server = (address, authkey)
        return _server


# In other processes: one manager connection per owning process's address.
_clients_lock = threading.Lock()
_clients: dict[tuple[str, int], Any] = {}


def _remote_store(address: tuple[str, int], authkey: bytes) -> Any:
    with _clients_lock:
        store = _clients.get(address)
        if store is None:
            manager = _Manager(address=address, authkey=authkey)
            try:
                manager.connect()
            except OSError as exc:
                raise ConnectionError(
                    f"cannot reach the test process's shared lists at {address[0]}:"
                    f"{address[1]} ({exc}): testing helpers on SparkCluster need the "
                    "executors on this machine (a local[...] master)"
                ) from exc
            store = _clients[address] = manager.store()  # type: ignore[attr-defined]
        return store


class SharedList:
    """A list every copy of a component can append to and read, in any process.

    ``append(item)``, ``pop_first()`` (``(True, item)`` or ``(False, None)``), ``items()``
    (a copy) and ``len()``. Items cross processes by pickle.
    """

    def __init__(self, name: str = "list") -> None:
        self.key = f"{name}-{uuid.uuid4().hex}"
        self._owner = os.getpid()
        self._entry: _Entry | None = _Entry()
        _entries[self.key] = self._entry
        self._remote: Any = None
        self._address: tuple[tuple[str, int], bytes] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        served = _serve() if self._owner == os.getpid() else self._address
        assert served is not None  # set by _attach in every other process
        address, authkey = served
        return (_attach, (self.key, self._owner, address, authkey))

    def append(self, item: Any) -> None:
        if self._entry is None:
            self._remote.append(self.key, item)
        else:
            self._entry.append(item)

    def pop_first(self) -> tuple[bool, Any]:
        if self._entry is None:
            return tuple(self._remote.pop_first(self.key))  # type: ignore[return-value]
        return self._entry.pop_first()

    def items(self) -> list[Any]:
        if self._entry is None:
            return list(self._remote.items(self.key))
        return self._entry.items()

    @property
    def is_remote(self) -> bool:
        """True in a process other than the one that made the list (calls cross a socket)."""
        return self._entry is None

    def __len__(self) -> int:
        return len(self.items())

    def __repr__(self) -> str:
        where = "here" if self._entry is not None else f"in process {self._owner}"
        return f"SharedList({self.key!r}, {where})"


def _attach(key: str, owner: int, address: tuple[str, int], authkey: bytes) -> SharedList:
    shared = SharedList.__new__(SharedList)
    shared.key = key
    shared._owner = owner
    shared._address = (address, authkey)
    if owner == os.getpid():
        shared._entry = _entry(key)
        shared._remote = None
    else:
        shared._entry = None
        shared._remote = _remote_store(address, authkey)
    return shared
