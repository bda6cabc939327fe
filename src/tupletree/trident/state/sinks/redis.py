"""RedisSinkFactory: an exactly-once sink into a Redis Stream (sinks/base.py has the
rules): each row one entry (``XADD``) whose fields are the columns, as
``RedisStreamSink`` writes ``{"message": ...}``, so ``RedisStreamSpout`` can read it.

``commit(txid)``: ``WATCH`` the partition's txid key, read it, decide; then one
``MULTI``/``EXEC`` with the batch's ``XADD``s and the ``SET`` of the txid. Redis runs
it whole or, if the txid key changed since the ``WATCH`` (a zombie of this partition
committed), not at all: the state reads again and decides again. A client that dies
before ``EXEC`` leaves nothing (Redis drops a queued transaction with its connection).
Redis does not roll back a command that fails inside ``EXEC``, so everything that could
fail is checked before ``MULTI``: each value's type (str, bytes, int, float), and that
the stream key holds a stream (or nothing).

Layout: the stream ``<stream>``; the txid of partition ``p`` in the string key
``<txid_prefix><p>`` (default ``<stream>:txid:``), one key per partition so partitions
never make one another's ``WATCH`` fail, as ``<txid>/<partitions>`` (the partition count
it was committed under, sinks/base.py; a bare ``<txid>`` from before it was kept is
read too); ``<txid_prefix>widest`` holds the most partitions any layout had, so that
every partition's key is read. The other partitions' keys are read, not watched:
within a txid every partition comes to the same decision about them.

``maxlen`` (default None: unbounded, the consumers' business) trims the stream
approximately on each ``XADD``. Durability is Redis's persistence setting (``appendonly
yes``): without it a restart of Redis loses rows and txids alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.extras import require
from tupletree.redact import redact, scrub, secrets
from tupletree.store import StoreError
from tupletree.trident.state.base import State
from tupletree.trident.state.sinks.base import Mark, SinkFactory, SinkState

MAX_ATTEMPTS = 20
SOCKET_TIMEOUT_SECS = 10.0
_FIELD_TYPES = (str, bytes, int, float)


class RedisSinkState(SinkState):
    def __init__(
        self,
        url: str,
        stream: str,
        columns: Sequence[str] | None,
        txid_prefix: str,
        partition: int,
        maxlen: int | None,
        partitions: int = 1,
    ) -> None:
        redis = require("redis", "redis", "RedisSinkFactory")
        where = f"Redis sink stream {stream!r} at {redact(url)}"
        super().__init__(where, columns, partition, partitions)
        self._secrets = secrets(url)
        self._redis = redis
        self.stream, self.maxlen = stream, maxlen
        self.txid_prefix = txid_prefix
        self.txid_key = f"{txid_prefix}{partition}"
        # the largest partition count any layout wrote under: every key below it is read
        self.widest_key = f"{txid_prefix}widest"
        self._widest = 0
        self.client = redis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT_SECS, socket_connect_timeout=SOCKET_TIMEOUT_SECS
        )

    def last_committed_txid(self) -> int | None:
        return _mark(self._call(lambda: self.client.get(self.txid_key))).txid

    def _marks(self, pipe: Any) -> dict[int, Mark]:
        """Every partition's record: of the partitions of the widest layout on record
        (``widest``), and of any larger count the records name (kept before it was)."""
        widest = pipe.get(self.widest_key)
        self._widest = int(widest) if widest else 0
        count = max(self.partitions, self._widest)
        marks = _marks(pipe.mget([f"{self.txid_prefix}{q}" for q in range(count)]), 0)
        more = max([m.partitions or 0 for m in marks.values()], default=0)
        if more > count:
            keys = [f"{self.txid_prefix}{q}" for q in range(count, more)]
            marks.update(_marks(pipe.mget(keys), count))
        return marks

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except (self._redis.ConnectionError, self._redis.TimeoutError) as exc:
            message = f"{self.where}: {scrub(str(exc), self._secrets)}"
            raise StoreError(message, store=self.where) from None

    def _entry(self, row: list[Any]) -> dict[str, Any]:
        assert self.columns is not None
        for column, value in zip(self.columns, row, strict=True):
            if isinstance(value, bool) or not isinstance(value, _FIELD_TYPES):
                raise TypeError(
                    f"{self.where}: column {column!r} holds {type(value).__name__} "
                    f"{value!r}; a stream field takes str, bytes, int or float"
                )
        return dict(zip(self.columns, row, strict=True))

    def write(self, txid: int | None, rows: list[list[Any]]) -> bool:
        entries = [self._entry(row) for row in rows]
        return bool(self._call(lambda: self._write(txid, entries)))

    def _write(self, txid: int | None, entries: list[dict[str, Any]]) -> bool:
        for _ in range(MAX_ATTEMPTS):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(self.txid_key)
                    kind = pipe.type(self.stream)
                    if kind not in (b"none", b"stream"):
                        raise TypeError(f"{self.where}: the key holds a {kind.decode()}")
                    if not self.decide(txid, self._marks(pipe)):
                        return False
                    pipe.multi()
                    for entry in entries:
                        pipe.xadd(self.stream, entry, maxlen=self.maxlen, approximate=True)
                    if txid is not None:
                        pipe.set(self.txid_key, f"{txid}/{self.partitions}")
                        if self.partitions > self._widest:
                            pipe.set(self.widest_key, self.partitions)
                    pipe.execute()
                    return True
                except self._redis.WatchError:
                    continue  # the txid key moved: read it again and decide again
        raise StoreError(
            f"{self.where}: partition {self.partition}'s txid key changed on each of "
            f"{MAX_ATTEMPTS} tries (another writer of this partition?)",
            store=self.where,
        )


def _mark(raw: bytes | None) -> Mark:
    if raw is None:
        return Mark(None, None)
    txid, _, partitions = raw.decode().partition("/")
    return Mark(int(txid), int(partitions) if partitions else None)


def _marks(raws: list[bytes | None], first: int) -> dict[int, Mark]:
    return {first + i: _mark(raw) for i, raw in enumerate(raws) if raw is not None}


class RedisSinkFactory(SinkFactory):
    store_kind = "redis"

    def __init__(
        self,
        stream: str,
        url: str = "redis://127.0.0.1:6379/0",
        columns: Sequence[str] | None = None,
        *,
        txid_prefix: str | None = None,
        maxlen: int | None = None,
    ) -> None:
        if not isinstance(stream, str) or not stream:
            raise ValueError(f"Redis sink stream must be a non-empty str, got {stream!r}")
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 1):
            raise ValueError(f"Redis sink maxlen must be None or an int >= 1, got {maxlen!r}")
        self.stream, self.url, self.maxlen = stream, url, maxlen
        self.columns = None if columns is None else list(columns)
        self.txid_prefix = f"{stream}:txid:" if txid_prefix is None else txid_prefix

    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        return RedisSinkState(
            self.url,
            self.stream,
            self.columns,
            self.txid_prefix,
            partition_index,
            self.maxlen,
            num_partitions,
        )
