"""The Redis store (redis-py): one Redis, seen by every host (``shared_across_hosts``).

Config ``{"url": "redis://127.0.0.1:6379/0", "prefix": "tupletree:"}``. Layout: one
hash per namespace, at the key ``<prefix><namespace>``, its fields the namespace's keys
(``HGETALL tupletree:<namespace>`` shows one). Redis deletes a hash when its last field
goes, so the hashes that exist are exactly the non-empty namespaces.

Rules:

- ``apply`` is one MULTI/EXEC: Redis runs it whole, nothing of another client between
  its commands. With expectations, the client first WATCHes the hashes they name and
  reads them; if they do not hold it returns False without writing; if they hold it
  sends the MULTI/EXEC, which Redis refuses (WatchError) when any watched hash changed
  in between. Then it reads again: still holding, it retries (the change was to another
  field of the hash); not holding, it returns False. At most ``MAX_ATTEMPTS`` tries,
  then StoreError: a hash that changes on every try starves the check.
- ``namespaces(prefix)`` SCANs the keys ``<prefix><namespace prefix>*`` (of type hash).
  A set of namespaces kept beside the hashes would answer without walking the keyspace,
  but every ``apply`` would have to keep it right: a Delete that empties a hash must
  remove its name, which MULTI/EXEC cannot decide (it has no conditionals). SCAN cannot
  drift from the data, and listing namespaces is rare (recovery, start-up).
- No retries inside redis-py: a MULTI/EXEC whose reply a dropped connection lost may
  or may not have been applied, so it surfaces as StoreError saying so (the caller
  decides; Trident's expectations make a second try safe). A connection lost before
  EXEC went out (while checking expectations) is tried once more, as are reads.
- One Redis server (a primary, with replicas if you like), not Redis Cluster: an
  ``apply`` spans namespaces, so its hashes must live in one keyspace.
- What Redis keeps depends on its persistence settings (``appendonly yes`` with
  ``appendfsync always`` or ``everysec``): with none, a restart of Redis loses
  everything. The store cannot choose this for the server; docs/state-backends.md says
  what to set.

Cost: a multi-get is one HMGET; an ``apply`` one round trip, three with expectations
(WATCH, HMGET, MULTI/EXEC). Figures in notes/performance.md.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from tupletree.extras import missing
from tupletree.redact import redact, scrub, secrets
from tupletree.store.base import (
    Clear,
    Delete,
    Expect,
    Put,
    Store,
    StoreError,
    Write,
    check_writes,
    runs,
)

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.exceptions import WatchError
    from redis.retry import Retry
except ImportError as exc:  # the extra is optional
    raise missing("redis", "redis", "the redis store") from exc

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX = "tupletree:"
MAX_PREFIX_CHARS = 256
MAX_ATTEMPTS = 100
SOCKET_TIMEOUT_SECS = 30.0
CONNECT_TIMEOUT_SECS = 5.0

_GLOB = re.compile(r"([*?\[\]\\])")
_T = TypeVar("_T")


class RedisStore(Store):
    shared_across_hosts = True

    def __init__(self, url: str = DEFAULT_URL, prefix: str = DEFAULT_PREFIX) -> None:
        if not isinstance(url, str) or "://" not in url:
            # not shown: without a scheme, 'user:password@host' cannot be told apart
            raise ValueError(
                "redis store: url must be a redis://, rediss:// or unix:// URL (the value "
                "given is not shown: it may hold a password)"
            )
        if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX_CHARS:
            raise ValueError(
                f"redis store: prefix must be a str of up to {MAX_PREFIX_CHARS} characters"
            )
        self._secrets = secrets(url)
        self._closed = False
        self.prefix = prefix
        self.name = f"redis store {redact(url)} keys {prefix + '*'!r}"
        try:
            self._client = redis.Redis.from_url(
                url,
                socket_timeout=SOCKET_TIMEOUT_SECS,
                socket_connect_timeout=CONNECT_TIMEOUT_SECS,
                retry=Retry(NoBackoff(), 0),
                client_name="tupletree-store",
            )
        except ValueError as exc:
            raise ValueError(f"{self.name}: bad url: {self._scrub(exc)}") from None
        try:
            self._client.ping()
        except redis.RedisError as exc:
            self._client.close()
            raise self._error("cannot connect", exc) from None

    def _scrub(self, exc: BaseException) -> str:
        return scrub(f"{type(exc).__name__}: {exc}", self._secrets)

    def _error(self, doing: str, exc: BaseException) -> StoreError:
        # `from None` at the raise: the cause's text is here, scrubbed, and a redis-py
        # exception chained below would be printed unscrubbed.
        return StoreError(f"{self.name}: {doing}: {self._scrub(exc)}", store=self.name)

    def _key(self, namespace: str) -> str:
        return self.prefix + namespace

    def _check_open(self) -> None:
        # redis-py would quietly open a new connection for a closed client
        if self._closed:
            raise StoreError(f"{self.name}: the store is closed", store=self.name)

    def _read(self, doing: str, fn: Callable[[], _T]) -> _T:
        self._check_open()
        for attempt in (1, 2):
            try:
                return fn()
            except redis.ConnectionError as exc:
                if attempt == 2:
                    raise self._error(f"{doing} failed", exc) from None
            except redis.RedisError as exc:
                raise self._error(f"{doing} failed", exc) from None
        raise AssertionError("unreachable")

    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        return self._read("get", lambda: self._client.hmget(self._key(namespace), list(keys)))

    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        table = self._read("items", lambda: self._client.hgetall(self._key(namespace)))
        return iter(sorted((k.decode(), v) for k, v in table.items()))

    def namespaces(self, prefix: str) -> list[str]:
        full = self.prefix + prefix
        pattern = _GLOB.sub(r"\\\1", full) + "*"

        def scan() -> set[bytes]:
            return set(self._client.scan_iter(match=pattern, count=1000, _type="hash"))

        cut = len(self.prefix)
        names = {k.decode()[cut:] for k in self._read("namespaces", scan)}
        return sorted(n for n in names if n.startswith(prefix))

    def apply(self, writes: Sequence[Write], expect: Sequence[Expect] = ()) -> bool:
        check_writes(writes, expect)
        if not writes and not expect:
            return True
        self._check_open()
        watched = sorted({self._key(e.namespace) for e in expect})
        reconnected = False
        for _ in range(MAX_ATTEMPTS):
            executing = False
            try:
                with self._client.pipeline(transaction=True) as pipe:
                    if watched:
                        pipe.watch(*watched)  # from here, commands run at once
                        if not self._holds(pipe, expect):
                            return False
                        if not writes:
                            return True
                        pipe.multi()
                    for kind, run in runs(writes):
                        self._write(pipe, kind, run)
                    executing = True  # MULTI ... EXEC go out together
                    try:
                        pipe.execute()
                    except WatchError:
                        continue
                    return True
            except redis.ConnectionError as exc:
                if not executing and not reconnected:
                    # lost while checking, before EXEC was sent: nothing applied; once
                    # more on a new connection
                    reconnected = True
                    continue
                raise self._apply_error(exc, executing) from None
            except redis.RedisError as exc:
                raise self._apply_error(exc, executing) from None
        raise StoreError(
            f"{self.name}: apply gave up after {MAX_ATTEMPTS} attempts: the watched hashes "
            f"{watched[:5]} changed during each one (their expectations still held)",
            store=self.name,
        )

    def _apply_error(self, exc: BaseException, executing: bool) -> StoreError:
        unknown = " (it may or may not have been applied)" if executing else ""
        return self._error(f"apply failed{unknown}", exc)

    def _holds(self, pipe: Any, expect: Sequence[Expect]) -> bool:
        by_ns: dict[str, list[Expect]] = defaultdict(list)
        for e in expect:
            by_ns[e.namespace].append(e)
        for ns, es in by_ns.items():
            current = pipe.hmget(self._key(ns), [e.key for e in es])
            if any(c != e.value for c, e in zip(current, es, strict=True)):
                return False
        return True

    def _write(self, pipe: Any, kind: type, run: list[Write]) -> None:
        """Queue one run of writes of one kind in the MULTI: one command per namespace."""
        if kind is Clear:
            pipe.delete(*dict.fromkeys(self._key(w.namespace) for w in run))
            return
        by_ns: dict[str, Any] = {}
        for w in run:
            if isinstance(w, Put):
                by_ns.setdefault(w.namespace, {})[w.key] = w.value  # later Puts win
            elif isinstance(w, Delete):
                by_ns.setdefault(w.namespace, {})[w.key] = None
        for ns, fields in by_ns.items():
            if kind is Put:
                pipe.hset(self._key(ns), mapping=fields)
            else:
                pipe.hdel(self._key(ns), *fields)

    def close(self) -> None:
        self._closed = True
        self._client.close()


def open_redis(config: Mapping[str, Any]) -> RedisStore:
    return RedisStore(config.get("url", DEFAULT_URL), config.get("prefix", DEFAULT_PREFIX))
