"""Crashing a LocalCluster topology at a chosen store write.

A worker that dies leaves behind exactly what it had written to its stores. ``Crash``
stands for that: from the write that matches ``when`` on (that write included, as if
the process died right after it), every store opened through the provider refuses to
write, while the topology itself goes on in memory, which no longer matters. The test
then kills the topology and submits it again over the same store (the provider config
without ``crash``), which is what Spark does when it restarts a dead worker.

``install(monkeypatch)`` lets every backend's opener take ``{"crash": name}`` in its
config.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tupletree.state.kv import COMMIT_TXID_KEY, PREPARE_TXID_KEY, TXID_SUFFIX
from tupletree.state.protocol import TX_STATE_KEY
from tupletree.store import BACKENDS, Put, Store, StoreError, Write
from tupletree.store.codec import loads_json

_CRASHES: dict[str, Crash] = {}


class Crash:
    """``on_crash`` runs at the crash, on the thread that wrote (to copy what lives
    outside the store as it was at that moment: a queue file, say)."""

    def __init__(
        self, when: Callable[[Sequence[Write]], bool], on_crash: Callable[[], None] | None = None
    ) -> None:
        self.when = when
        self.on_crash = on_crash
        self.name = f"crash-{uuid.uuid4().hex[:8]}"
        self.crashed = False
        _CRASHES[self.name] = self

    def config(self, provider_config: dict[str, Any]) -> dict[str, Any]:
        return {**provider_config, "crash": self.name}


class CrashingStore(Store):
    def __init__(self, inner: Store, crash: Crash) -> None:
        self.inner = inner
        self.crash = crash
        self.name = inner.name
        self.shared_across_hosts = inner.shared_across_hosts

    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        return self.inner.get(namespace, keys)

    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        return self.inner.items(namespace)

    def namespaces(self, prefix: str) -> list[str]:
        return self.inner.namespaces(prefix)

    def apply(self, writes: Sequence[Write], expect: Sequence[Any] = ()) -> bool:
        if self.crash.crashed:
            raise StoreError("this worker crashed (a test's Crash)", store=self.name)
        applied = self.inner.apply(writes, expect)
        if applied and self.crash.when(writes):
            self.crash.crashed = True
            if self.crash.on_crash is not None:
                self.crash.on_crash()
        return applied

    def close(self) -> None:
        self.inner.close()


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    for kind, (opener, accepted) in list(BACKENDS.items()):

        def crashing(config: Any, opener: Any = opener) -> Store:
            config = dict(config)
            name = config.pop("crash", None)
            store = opener(config)
            return store if name is None else CrashingStore(store, _CRASHES[name])

        monkeypatch.setitem(BACKENDS, kind, (crashing, accepted | {"crash"}))


# -- when ---------------------------------------------------------------------------


def txid_written(component: str, which: str, txid: int, tasks: int) -> Callable[[Any], bool]:
    """After the last of ``tasks`` tasks of ``component`` wrote its ``which`` txid
    (``"prepare"`` or ``"commit"``) as ``txid``: all of them prepared (or committed)."""
    key = PREPARE_TXID_KEY if which == "prepare" else COMMIT_TXID_KEY
    seen: set[str] = set()
    value = str(txid).encode()

    def when(writes: Sequence[Write]) -> bool:
        for w in writes:
            if (
                isinstance(w, Put)
                and w.namespace.startswith(component + "-")
                and w.namespace.endswith(TXID_SUFFIX)
                and w.key == key
                and w.value == value
            ):
                seen.add(w.namespace)
        return len(seen) >= tasks

    return when


def checkpoint_saved(state: str, txid: int) -> Callable[[Any], bool]:
    """After the checkpoint spout saved ``state``(``txid``)."""

    def when(writes: Sequence[Write]) -> bool:
        return any(
            isinstance(w, Put)
            and w.key == TX_STATE_KEY
            and loads_json(w.value) == {"txid": txid, "state": state}
            for w in writes
        )

    return when
