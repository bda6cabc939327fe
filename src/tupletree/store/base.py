"""The store: the one durable key-value layer under Trident, stateful bolts and windows.

Everything tupletree must remember across the death of a worker goes through a
``Store``: Trident's progress (the coordinator's current txid and attempts, the spouts'
batch metadata: what Storm keeps in ZooKeeper), a stateful bolt's ``KeyValueState``
(committed and prepared), a persistent window's tuples, and Trident's backing maps. One
interface, four backends (``open_store``): memory, SQLite, Redis, PostgreSQL.

The model is deliberately small:

- a *namespace* (text) holds *keys* (text) mapped to *values* (bytes); callers choose
  the encoding (``codec.py`` has JSON and pickle);
- reads: ``get`` (many keys of one namespace at once: Trident's one multi-get per batch
  and partition), ``items`` (a namespace in key order) and ``namespaces`` (by prefix);
- writes: ``apply(writes, expect=...)``, a list of ``Put``/``Delete``/``Clear`` over any
  namespaces, applied **atomically**, and only if every ``Expect`` holds when they are
  applied (compare-and-set, so a zombie coordinator cannot move a txid twice). It
  returns whether it applied. Nothing is ever half-applied.

Why one atomic ``apply`` and not transactions with begin/commit: every user of the
store knows its whole write set when it commits (a stateful bolt's prepared map, a
batch's multi-put, a txid move), so one call is enough, and one call maps directly onto
a SQL transaction, a Redis MULTI/EXEC under WATCH, and a dict update under a lock.

Bounds: the store bounds nothing itself; each caller states what it keeps (a window's
tuples up to its length, a prepared map up to one checkpoint's updates). Keys up to
``MAX_KEY_CHARS`` and namespaces up to ``MAX_NAMESPACE_CHARS`` are refused beyond that,
naming the offender.

``shared_across_hosts`` is False for memory and SQLite: a cluster whose workers run on
several hosts refuses them, with the reason, for anything that must survive a worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MAX_KEY_CHARS = 4096
MAX_NAMESPACE_CHARS = 512


class StoreError(RuntimeError):
    """A backend could not be reached or refused an operation. ``store`` names the
    backend and its address (without credentials)."""

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


@dataclass(frozen=True, slots=True)
class Put:
    """Set ``key`` in ``namespace`` to ``value``."""

    namespace: str
    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove ``key`` from ``namespace`` (nothing if absent)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class Clear:
    """Remove every key of ``namespace``."""

    namespace: str


@dataclass(frozen=True, slots=True)
class Expect:
    """``apply`` proceeds only if ``key`` of ``namespace`` holds ``value`` (None: absent)."""

    namespace: str
    key: str
    value: bytes | None


Write = Put | Delete | Clear


def check_name(kind: str, name: object, limit: int) -> str:
    """``name`` if it is a non-empty str within ``limit`` characters; ValueError naming
    it otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"store {kind} must be a non-empty str, got {name!r}")
    if len(name) > limit:
        raise ValueError(f"store {kind} {name[:60]!r}... is {len(name)} characters, over {limit}")
    # Every backend keeps names as UTF-8 text, and PostgreSQL's text refuses NUL: a name
    # one backend could not store is refused by all of them, alike.
    if "\x00" in name:
        raise ValueError(f"store {kind} {name[:60]!r} holds a NUL character")
    try:
        name.encode()
    except UnicodeEncodeError:
        raise ValueError(f"store {kind} {name[:60]!r} is not valid Unicode text") from None
    return name


def check_writes(writes: Sequence[Write], expect: Sequence[Expect]) -> None:
    """ValueError naming the first malformed write or expectation."""
    for w in writes:
        if not isinstance(w, Put | Delete | Clear):
            raise ValueError(f"store write must be Put, Delete or Clear, got {w!r}")
        check_name("namespace", w.namespace, MAX_NAMESPACE_CHARS)
        if not isinstance(w, Clear):
            check_name("key", w.key, MAX_KEY_CHARS)
        if isinstance(w, Put) and not isinstance(w.value, bytes):
            raise ValueError(
                f"store value for {w.namespace!r}/{w.key!r} must be bytes, got "
                f"{type(w.value).__name__} (encode it with tupletree.store.codec)"
            )
    for e in expect:
        if not isinstance(e, Expect):
            raise ValueError(f"store expectation must be Expect, got {e!r}")
        check_name("namespace", e.namespace, MAX_NAMESPACE_CHARS)
        check_name("key", e.key, MAX_KEY_CHARS)


def runs(writes: Sequence[Write]) -> Iterator[tuple[type, list[Write]]]:
    """Consecutive writes of one kind, in order: ``(Put, [...])``, ``(Delete, [...])``,
    ``(Clear, [...])``. Writes of one run commute but for the same key, where the later
    one wins (a backend keeps the last), so each run can be one statement."""
    kind: type | None = None
    run: list[Write] = []
    for w in writes:
        if type(w) is not kind and run:
            yield kind, run  # type: ignore[misc]
            run = []
        kind = type(w)
        run.append(w)
    if run:
        yield kind, run  # type: ignore[misc]


class Store(ABC):
    """A connection to one backend. Not shared between threads: each task opens its own
    (``open_store``), as each holds its own database connection, and closes it when the
    task ends. Stores opened on the same file or server (the tasks of several workers)
    see one another's writes as soon as ``apply`` returns.

    Errors: bad input (a malformed write, a bad config value) is a ValueError naming it;
    a backend that cannot be reached or refuses the credentials is a StoreError raised
    by the constructor, at open; one that fails later, a StoreError from the call. A
    StoreError from ``apply`` means it wrote nothing, unless its message says the
    connection was lost during the commit ("may or may not have been applied"): then
    read back, or apply again under the same expectations (they tell which)."""

    #: Whether workers on other hosts see the same data (False: memory, SQLite).
    shared_across_hosts: bool = False
    #: What to call this store in messages: backend and address, without credentials.
    name: str = "store"

    @abstractmethod
    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        """The values of ``keys`` in ``namespace``, in order (None where absent)."""

    @abstractmethod
    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        """Every (key, value) of ``namespace``, in key order (a snapshot)."""

    @abstractmethod
    def namespaces(self, prefix: str) -> list[str]:
        """The non-empty namespaces whose names start with ``prefix``, sorted."""

    @abstractmethod
    def apply(self, writes: Sequence[Write], expect: Sequence[Expect] = ()) -> bool:
        """Apply ``writes`` in order, atomically, if every ``expect`` holds; True if
        applied, False (and nothing written) if an expectation did not hold."""

    def close(self) -> None:  # noqa: B027 (optional: most backends hold a connection)
        """Release the connection. The data stays (but for a private memory store)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
