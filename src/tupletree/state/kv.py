"""KeyValueState: a stateful bolt task's state, checkpointed in a ``tupletree.store``.

What the bolt sees (Storm's KeyValueState): ``put(key, value)``, ``get(key,
default=None)``, ``delete(key)`` (returns the value it removed), iteration over
``(key, value)`` pairs, ``key in state``. What the checkpoint protocol calls:
``prepare_commit(txid)``, ``commit(txid)``, ``rollback()``.

The layout in the store is Storm's Redis one (RedisKeyValueState), for every backend,
for a state named ``ns`` (``<component>-<task index>``):

- namespace ``ns``: the committed state, key -> value;
- namespace ``ns$prepare``: the prepared, not yet committed changes: key -> value, or a
  tombstone (the empty value) for a key deleted;
- namespace ``ns$txid``: ``prepare`` and ``commit``, the last prepared and committed txid.

Each checkpoint step is one atomic ``Store.apply``: PREPARE writes the changes made
since the last PREPARE into ``ns$prepare`` and the prepare txid; COMMIT applies the
prepared changes to ``ns`` (puts and tombstone deletes), records the commit txid and
clears ``ns$prepare``; ROLLBACK clears ``ns$prepare`` and sets the prepare txid back to
the commit txid. A task that starts again (its worker died) finds the committed state in
``ns`` and what it had prepared in ``ns$prepare``, so a COMMIT that the checkpoint spout
sends while recovering commits what was prepared before the crash.

Both writes carry an expectation on ``ns$txid`` (the store's compare-and-set): they
apply only if the txids are still what this instance last wrote. Another instance of the
same task (a worker thought dead that still runs) is refused with a StateError instead
of silently interleaving its checkpoints with this one's.

Encodings: keys as JSON text (str, int, float, bool, None and tuples of them; a key
comes back as it went in, a tuple as a tuple), so they read well in the backend;
values with pickle, since they are the bolt's own objects. A value is encoded at
PREPARE: what ``get`` returned and was then changed without ``put`` is not saved (as
with Storm's Redis state): put what you change. A value that does not pickle fails its
PREPARE; its key is checked at ``put`` from then on, so the input that puts one again
fails alone.

Memory: the changes since the last PREPARE and the prepared changes, as dicts (one
checkpoint interval's distinct keys), and a cache of committed values of at most
``cache_entries`` keys (so a ``get`` of a hot key does not go to the backend). Only the
task that owns ``ns`` writes it, so the cache stays true.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any, Final

from tupletree.store.base import MAX_KEY_CHARS, Clear, Delete, Expect, Put, Store, Write

TOMBSTONE: Final = b""
PREPARE_SUFFIX: Final = "$prepare"
TXID_SUFFIX: Final = "$txid"
COMMIT_TXID_KEY: Final = "commit"
PREPARE_TXID_KEY: Final = "prepare"
CACHE_ENTRIES = 100_000
# Keys remembered as once unsaveable (checked at put): input can make any number, so a
# bound; past it the set starts over, and a forgotten key costs one PREPARE again.
MAX_SUSPECT_KEYS = 10_000

# A str key this long or shorter fits the store's key limit whatever it holds: JSON
# writes a character as at most 12 (an astral one as two \uXXXX escapes), plus quotes.
_ALWAYS_FITS: Final = (MAX_KEY_CHARS - 2) // 12

_MISSING: Final[Any] = object()
_DELETED: Final[Any] = object()
_KEY_SCALARS = (str, int, float, bool, type(None))


class StateError(RuntimeError):
    """A checkpoint step the state cannot take: a txid out of order, another instance
    writing the same namespace, a key or value it cannot store. ``namespace`` names the
    state."""

    def __init__(self, message: str, *, namespace: str) -> None:
        super().__init__(message)
        self.namespace = namespace

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_state_error, (str(self), self.namespace))


def _rebuild_state_error(message: str, namespace: str) -> StateError:
    return StateError(message, namespace=namespace)


def _check_key(key: Any) -> None:
    if isinstance(key, tuple):
        for part in key:
            _check_key(part)
    elif not isinstance(key, _KEY_SCALARS):
        raise TypeError(
            f"state keys must be str, int, float, bool, None or tuples of them, got "
            f"{type(key).__name__} {key!r}"
        )


def encode_key(key: Any) -> str:
    return json.dumps(key, separators=(",", ":"))


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def decode_key(text: str) -> Any:
    return _tupled(json.loads(text))


def _internal(key: Any) -> Any:
    """The key the state's own dicts use: a str as it is, any other key as its stored
    text in a 1-tuple (never equal to a str). Python's dicts take 2, 2.0 and True==1 for
    one key and the store, keyed by JSON text, does not: keyed by the raw key, a value
    put as 2.0 was read back by get(2) until a restart and not after, and a miss cached
    for 2 hid 2.0. Keyed by the text, the state answers as its store does."""
    kind = type(key)
    if kind is str:
        return key
    if kind is int:
        return (str(key),)  # json.dumps's text for an int, without its cost
    _check_key(key)
    return (encode_key(key),)


def _stored(ikey: Any) -> str:
    """The store's key for an internal key."""
    return encode_key(ikey) if type(ikey) is str else ikey[0]


def _from_stored(text: str) -> Any:
    """The internal key for a key read from the store (written by ``encode_key``)."""
    return json.loads(text) if text.startswith('"') else (text,)


def _user(ikey: Any) -> Any:
    """The key as the bolt put it (a tuple comes back a tuple)."""
    return ikey if type(ikey) is str else decode_key(ikey[0])


def _txid(data: bytes | None) -> int | None:
    return None if data is None else int(data)


def _txid_bytes(txid: int | None) -> bytes | None:
    return None if txid is None else str(txid).encode()


class KeyValueState:
    """See the module docstring."""

    def __init__(self, store: Store, namespace: str, *, cache_entries: int = CACHE_ENTRIES) -> None:
        self.namespace = namespace
        self._store = store
        self._prepare_ns = namespace + PREPARE_SUFFIX
        self._txid_ns = namespace + TXID_SUFFIX
        self._cache_entries = cache_entries
        self._pending: dict[Any, Any] = {}
        self._cache: dict[Any, bytes | None] = {}
        # Keys whose value could not be saved at a PREPARE: checked at put since.
        self._suspect: set[Any] = set()
        commit, prepare = store.get(self._txid_ns, [COMMIT_TXID_KEY, PREPARE_TXID_KEY])
        self.commit_txid = _txid(commit)
        self.prepare_txid = _txid(prepare)
        # What was prepared and not committed when this task's last instance stopped.
        self._prepared: dict[Any, bytes] = {
            _from_stored(k): v for k, v in store.items(self._prepare_ns)
        }

    # -- what the bolt uses ----------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        # A str key is its own internal key: the per-input path stays a few dict steps.
        if type(key) is str:
            if len(key) > _ALWAYS_FITS:
                self._check_length(key)
        else:
            key = _internal(key)
            if len(key[0]) > _ALWAYS_FITS:
                self._check_length(key)
        if self._suspect and key in self._suspect:
            self._check_saveable(key, value)
        self._pending[key] = value

    def get(self, key: Any, default: Any = None) -> Any:
        if type(key) is not str:
            key = _internal(key)
        value = self._pending.get(key, _MISSING)
        if value is not _MISSING:
            return default if value is _DELETED else value
        data = self._prepared.get(key)
        if data is None:
            data = self._committed(key)
            if data is None:
                return default
        elif data == TOMBSTONE:
            return default
        return pickle.loads(data)

    def delete(self, key: Any) -> Any:
        """Remove ``key``; returns the value it had (None if none)."""
        ikey = _internal(key)
        if len(ikey if type(ikey) is str else ikey[0]) > _ALWAYS_FITS:
            self._check_length(ikey)
        old = self.get(key)
        self._pending[ikey] = _DELETED
        return old

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value), the committed state overlaid by the prepared and the
        newer changes. Reads the whole committed namespace: a cost in the state's size."""
        merged: dict[Any, Any] = {}
        for k, data in self._store.items(self.namespace):
            merged[_from_stored(k)] = data
        for key, data in self._prepared.items():
            if data == TOMBSTONE:
                merged.pop(key, None)
            else:
                merged[key] = data
        for key, value in self._pending.items():
            if value is _DELETED:
                merged.pop(key, None)
            else:
                merged[key] = _Live(value)
        for key, value in merged.items():
            yield _user(key), value.value if isinstance(value, _Live) else pickle.loads(value)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self)

    # -- the checkpoint protocol -----------------------------------------------------

    def prepare_commit(self, txid: int) -> None:
        """Save the changes since the last PREPARE as prepared for ``txid``."""
        if self.commit_txid is not None and txid <= self.commit_txid:
            raise StateError(
                f"state {self.namespace!r}: cannot prepare txid {txid}, txid "
                f"{self.commit_txid} is already committed",
                namespace=self.namespace,
            )
        encoded = self._encode_pending()
        writes: list[Write] = [Put(self._prepare_ns, _stored(k), v) for k, v in encoded.items()]
        writes.append(Put(self._txid_ns, PREPARE_TXID_KEY, _txid_bytes(txid)))  # type: ignore[arg-type]
        self._apply(writes, f"prepare txid {txid}")
        self._prepared.update(encoded)
        self._pending = {}
        self.prepare_txid = txid

    def commit(self, txid: int) -> None:
        """Make what was prepared for ``txid`` the committed state."""
        if self.commit_txid is not None and txid < self.commit_txid:
            raise StateError(
                f"state {self.namespace!r}: cannot commit txid {txid}, txid "
                f"{self.commit_txid} is already committed",
                namespace=self.namespace,
            )
        if self._prepared and self.prepare_txid != txid:
            raise StateError(
                f"state {self.namespace!r}: cannot commit txid {txid}, the prepared "
                f"changes are for txid {self.prepare_txid}",
                namespace=self.namespace,
            )
        ns = self.namespace
        writes: list[Write] = []
        for key, data in self._prepared.items():
            k = _stored(key)
            writes.append(Delete(ns, k) if data == TOMBSTONE else Put(ns, k, data))
        writes.append(Put(self._txid_ns, COMMIT_TXID_KEY, _txid_bytes(txid)))  # type: ignore[arg-type]
        writes.append(Clear(self._prepare_ns))
        self._apply(writes, f"commit txid {txid}")
        self.commit_txid = txid
        cache = self._cache
        for key, data in self._prepared.items():
            if key in cache or len(cache) < self._cache_entries:
                cache[key] = None if data == TOMBSTONE else data
        self._prepared = {}

    def rollback(self) -> None:
        """Drop every uncommitted change (prepared or newer)."""
        commit = self.commit_txid
        writes: list[Write] = [Clear(self._prepare_ns)]
        if commit is None:
            writes.append(Delete(self._txid_ns, PREPARE_TXID_KEY))
        else:
            writes.append(Put(self._txid_ns, PREPARE_TXID_KEY, _txid_bytes(commit)))  # type: ignore[arg-type]
        self._apply(writes, "rollback")
        self.prepare_txid = commit
        self._prepared = {}
        self._pending = {}

    # -- inside ----------------------------------------------------------------------

    def _check_length(self, ikey: Any) -> None:
        """Refuse at put a key the store would refuse at PREPARE: there it would fail the
        whole checkpoint, and with it every input of the interval, again at each replay."""
        chars = len(_stored(ikey))
        if chars > MAX_KEY_CHARS:
            raise StateError(
                f"state {self.namespace!r}: key {_user(ikey)!r:.80}... is {chars} characters "
                f"stored (JSON text), over the store's {MAX_KEY_CHARS}; use a shorter key "
                "(a digest of it, say)",
                namespace=self.namespace,
            )

    def _committed(self, key: Any) -> bytes | None:
        cache = self._cache
        try:
            return cache[key]
        except KeyError:
            pass
        (data,) = self._store.get(self.namespace, [_stored(key)])
        if len(cache) >= self._cache_entries:
            # Forget the oldest quarter: cheap, and a hot key comes back on its next get.
            for old in list(cache)[: max(1, self._cache_entries // 4)]:
                del cache[old]
        cache[key] = data
        return data

    def _encode_pending(self) -> dict[Any, bytes]:
        encoded: dict[Any, bytes] = {}
        failed: list[tuple[Any, Any, Exception]] = []
        for key, value in self._pending.items():
            if value is _DELETED:
                encoded[key] = TOMBSTONE
                continue
            try:
                encoded[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                failed.append((key, value, exc))
        if failed:
            # The whole PREPARE fails, and every input of the interval is replayed: from
            # now on these keys' values are checked at put, so the input that puts one
            # again fails alone instead of failing every checkpoint it reaches.
            if len(self._suspect) + len(failed) > MAX_SUSPECT_KEYS:
                self._suspect.clear()
            self._suspect.update(key for key, _, _ in failed)
            key, value, exc = failed[0]
            more = f" (and {len(failed) - 1} more keys)" if len(failed) > 1 else ""
            raise self._unsaveable(key, value, exc, more) from exc
        return encoded

    def _check_saveable(self, ikey: Any, value: Any) -> None:
        """For a key whose value once could not be saved: refuse an unsaveable value at
        put (it is encoded again at PREPARE, so put what you change still holds)."""
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise self._unsaveable(ikey, value, exc) from exc

    def _unsaveable(self, ikey: Any, value: Any, exc: Exception, more: str = "") -> StateError:
        return StateError(
            f"state {self.namespace!r}: cannot save the value of key {_user(ikey)!r} "
            f"({type(value).__name__}){more}: {exc}",
            namespace=self.namespace,
        )

    def _apply(self, writes: list[Write], what: str) -> None:
        expect = [
            Expect(self._txid_ns, COMMIT_TXID_KEY, _txid_bytes(self.commit_txid)),
            Expect(self._txid_ns, PREPARE_TXID_KEY, _txid_bytes(self.prepare_txid)),
        ]
        if not self._store.apply(writes, expect):
            raise StateError(
                f"state {self.namespace!r}: {what} refused: its txids changed in "
                f"{self._store.name} since this task last wrote them (another instance "
                "of this task is running, or the store was changed by hand)",
                namespace=self.namespace,
            )

    def __repr__(self) -> str:
        return (
            f"KeyValueState({self.namespace!r}, committed txid {self.commit_txid}, "
            f"{len(self._prepared)} prepared, {len(self._pending)} pending changes)"
        )


class _Live:
    """A value not yet encoded, told apart from stored bytes while iterating."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
