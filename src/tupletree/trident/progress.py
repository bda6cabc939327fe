"""Progress: what Trident must remember across the death of any worker (Storm keeps it in
ZooKeeper), kept in a ``tupletree.store`` backend.

Which store: ``topology.trident.progress.store`` ("memory", "sqlite", "redis",
"postgresql") with ``topology.trident.progress.store.config`` (``{"path"}``, ``{"url"}``,
``{"dsn"}``, each with an optional ``"prefix"`` for its table or keys). Unset, it is a
memory store of the built topology's own (``TridentTopology.build`` names it, and
each submission of it, by the topology's name, has its own: ``memory_store_name``): right
for LocalCluster, where everything runs in one process, and like Storm's LocalCluster,
whose in-process ZooKeeper starts empty. A memory store does not outlive its process,
so on a cluster of several worker processes (SparkCluster) it is refused when a
component opens it outside the process that built the topology: choose a durable one.

Layout, per spout (``tx_id``: the name given to ``new_stream``, Storm's txStateId; a
topology resubmitted with the same names resumes where it stopped, as in Storm), all
values JSON, txids as 20-digit keys so that key order is txid order:

- ``trident/<tx_id>/coordinator``: ``currtx`` (the first txid not committed) and
  ``currattempts`` (txid -> the last attempt id started);
- ``trident/<tx_id>/commits``: txid -> ``{"attempt"}``, one entry per commit, written
  with the move of ``currtx`` in one compare-and-set: a txid can be committed once
  only. The last ``COMMIT_LOG_KEPT`` are kept;
- ``trident/<tx_id>/meta``: txid -> the spout coordinator's metadata for it (the
  partition list of a partitioned spout), kept until the txid succeeded;
- ``trident/<tx_id>/partitions``: ``<partition id>@<txid>`` -> that partition's batch
  metadata (Storm's RotatingTransactionalState per partition): written when a
  transactional spout first emits the txid (a replay re-emits from it), or when an
  opaque spout's txid commits; older entries go once a later txid succeeded.

Bounds: per spout, the active txids' attempts and metadata plus the kept commit log.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tupletree.config import Config
from tupletree.errors import InvalidConfigError
from tupletree.store import Delete, Expect, Put, Store, check_store_config, open_store
from tupletree.store.codec import dumps_json, loads_json
from tupletree.store.hosts import is_one_host, require_shared

COMMIT_LOG_KEPT = 10_000
_STORE = Config.TOPOLOGY_TRIDENT_PROGRESS_STORE
_CONFIG = Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG


def txid_key(txid: int) -> str:
    return f"{txid:020d}"


def check_progress_store(conf: Mapping[str, Any], component: str) -> None:
    """At submit: InvalidConfigError, naming the key, for a progress store the cluster's
    workers could not share (``tupletree.cluster.master``: where it runs). The memory
    store lives in the process that built the topology, so any cluster but LocalCluster
    ("local") refuses it; SQLite, on one host, only clusters of one host accept. A
    store config its backend would refuse (a key it does not take, a missing path or
    DSN) is refused here too, before any worker starts."""
    master = conf.get(Config.TUPLETREE_CLUSTER_MASTER)
    kind = conf.get(_STORE) or "memory"
    if master is None:
        _check_config(conf, component)
        return
    if kind == "memory" and master != "local":
        raise InvalidConfigError(
            f"Trident coordinator {component!r}: {_STORE} is unset or 'memory', whose store "
            f"lives in the process that built the topology, and the master {master!r} runs "
            f"workers in processes of their own, where its progress would die with the "
            f"worker: set {_STORE} to 'sqlite' (one host), 'redis' or 'postgresql', with "
            f"{_CONFIG}",
            key=_STORE,
            value=kind,
        )
    try:
        require_shared(kind, master, what=f"Trident coordinator {component!r}: {_STORE}")
    except ValueError as exc:
        raise InvalidConfigError(str(exc), key=_STORE, value=kind) from None
    _check_config(conf, component)


def _check_config(conf: Mapping[str, Any], component: str) -> None:
    """InvalidConfigError for a store config its backend would refuse when opened."""
    kind = conf.get(_STORE) or "memory"
    try:
        check_store_config(kind, conf.get(_CONFIG), what=f"{_CONFIG} ({_STORE} {kind!r})")
    except ValueError as exc:
        raise InvalidConfigError(
            # The keys, not the values: a DSN or URL may hold a password.
            f"Trident coordinator {component!r}: {exc}",
            key=_CONFIG,
            value=sorted(conf.get(_CONFIG) or {}),
        ) from None


def memory_store_name(build_name: str, topology: str) -> str:
    """The default memory store of one submission of a built topology: the same built
    topology submitted under two names must not share its txids (each coordinator would
    find its commits made by the other's)."""
    return f"{build_name}/{topology}"


def open_progress(conf: Mapping[str, Any], default_name: str, build_pid: int) -> Store:
    """The store ``conf`` names. ``default_name`` is the built topology's memory store
    (unset store), ``build_pid`` the process that built it (a memory store is refused
    in any other)."""
    kind = conf.get(_STORE) or "memory"
    config = dict(conf.get(_CONFIG) or {})
    if kind == "memory":
        prefix = config.pop("prefix", "")
        config.setdefault("name", default_name)
        config["name"] = f"{prefix}{config['name']}"
        if os.getpid() != build_pid:
            raise ValueError(
                f"{_STORE}: the memory store lives in one process, and this task runs in "
                f"another (pid {os.getpid()}) than the one that built the topology "
                f"(pid {build_pid}): its progress would die with its worker. Set {_STORE} "
                f"to 'sqlite' (one host), 'redis' or 'postgresql', with {_CONFIG}"
            )
    return open_store(kind, config, what=_STORE)


class Progress:
    """The progress of the spouts named ``tx_ids`` (one coordinator may manage several:
    it writes to each, reads the furthest, as Storm's MasterBatchCoordinator)."""

    def __init__(self, store: Store, tx_ids: Sequence[str]) -> None:
        if not tx_ids:
            raise ValueError("Progress needs at least one spout's tx id")
        self.store = store
        self.tx_ids = list(tx_ids)
        self._currtx_bytes: list[bytes | None] = []

    @staticmethod
    def ns(tx_id: str, part: str) -> str:
        return f"trident/{tx_id}/{part}"

    # -- the coordinator ---------------------------------------------------------------

    def load_coordinator(self) -> tuple[int, dict[int, int]]:
        """(current txid, attempts): the furthest ``currtx`` of the spouts (1 if none
        stored), and the highest attempt per txid. Every spout's ``currtx`` is then set
        to it, so each later commit can expect it."""
        store = self.store
        current = 1
        attempts: dict[int, int] = {}
        raw: list[bytes | None] = []
        for tx_id in self.tx_ids:
            currtx, stored = store.get(self.ns(tx_id, "coordinator"), ["currtx", "currattempts"])
            raw.append(currtx)
            if currtx is not None:
                current = max(current, int(loads_json(currtx)))
            if stored is not None:
                for txid, attempt in loads_json(stored).items():
                    t = int(txid)
                    attempts[t] = max(attempts.get(t, -1), int(attempt))
        value = dumps_json(current)
        if any(r != value for r in raw):
            writes = [Put(self.ns(t, "coordinator"), "currtx", value) for t in self.tx_ids]
            expect = [
                Expect(self.ns(t, "coordinator"), "currtx", r)
                for t, r in zip(self.tx_ids, raw, strict=True)
            ]
            if not store.apply(writes, expect):
                return self.load_coordinator()  # another coordinator wrote meanwhile
        self._currtx_bytes = [value] * len(self.tx_ids)
        return current, {t: a for t, a in attempts.items() if t >= current}

    def first_uncommitted(self, tx_id: str) -> int:
        """``currtx`` of spout ``tx_id`` as stored now: every txid below it committed."""
        (raw,) = self.store.get(self.ns(tx_id, "coordinator"), ["currtx"])
        return 1 if raw is None else int(loads_json(raw))

    def save_attempts(self, attempts: Mapping[int, int]) -> None:
        value = dumps_json({str(t): a for t, a in attempts.items()})
        self.store.apply(
            [Put(self.ns(t, "coordinator"), "currattempts", value) for t in self.tx_ids]
        )

    def commit(self, txid: int, attempt_id: int, attempts: Mapping[int, int]) -> bool:
        """Record that ``txid`` committed: ``currtx`` moves from ``txid`` to ``txid + 1``
        and the commit log gets the txid, atomically and only if ``currtx`` still is
        ``txid`` and the log has no entry for it. False (nothing written) otherwise:
        another coordinator moved it, and this one must reload."""
        old, new = dumps_json(txid), dumps_json(txid + 1)
        entry = dumps_json({"attempt": attempt_id})
        attempts_value = dumps_json({str(t): a for t, a in attempts.items()})
        writes: list[Any] = []
        expect: list[Expect] = []
        for tx_id in self.tx_ids:
            coordinator, commits = self.ns(tx_id, "coordinator"), self.ns(tx_id, "commits")
            writes += [
                Put(coordinator, "currtx", new),
                Put(coordinator, "currattempts", attempts_value),
                Put(commits, txid_key(txid), entry),
            ]
            if txid > COMMIT_LOG_KEPT:
                writes.append(Delete(commits, txid_key(txid - COMMIT_LOG_KEPT)))
            expect += [
                Expect(coordinator, "currtx", old),
                Expect(commits, txid_key(txid), None),
            ]
        return self.store.apply(writes, expect)

    def commits(self, tx_id: str) -> dict[int, int]:
        """txid -> attempt of every commit the log keeps (tests, the web view)."""
        return {
            int(k): int(loads_json(v)["attempt"])
            for k, v in self.store.items(self.ns(tx_id, "commits"))
        }

    # -- the spout coordinators' metadata, per txid ----------------------------------

    def coordinator_meta(self, tx_id: str, txid: int) -> tuple[bool, Any, Any]:
        """(stored?, the metadata stored for ``txid``, the one of the txid before it)."""
        found, current, previous = False, None, None
        for key, value in self.store.items(self.ns(tx_id, "meta")):
            t = int(key)
            if t == txid:
                found, current = True, loads_json(value)
            elif t < txid:
                previous = loads_json(value)
        return found, current, previous

    def put_coordinator_meta(self, tx_id: str, txid: int, meta: Any) -> None:
        self.store.apply([Put(self.ns(tx_id, "meta"), txid_key(txid), encode(meta, tx_id))])

    def cleanup_coordinator_meta(self, tx_id: str, before: int) -> None:
        """Drop metadata of txids below ``before`` (they succeeded)."""
        ns = self.ns(tx_id, "meta")
        old = [Delete(ns, k) for k, _ in self.store.items(ns) if int(k) < before]
        if old:
            self.store.apply(old)

    # -- emitter partitions' metadata, per txid ----------------------------------------

    def partition_metas(self, tx_id: str, partitions: Iterable[str]) -> dict[str, dict[int, Any]]:
        """partition id -> {txid: metadata} for ``partitions`` (one read)."""
        wanted = set(partitions)
        out: dict[str, dict[int, Any]] = {p: {} for p in wanted}
        for key, value in self.store.items(self.ns(tx_id, "partitions")):
            pid, _, txid = key.rpartition("@")
            if pid in wanted:
                out[pid][int(txid)] = loads_json(value)
        return out

    def put_partition_metas(
        self,
        tx_id: str,
        txid: int,
        metas: Mapping[str, Any],
        drop: Iterable[tuple[str, int]] = (),
    ) -> None:
        """Store each partition's metadata under ``txid`` (and drop the (partition,
        txid) entries in ``drop``), atomically."""
        ns = self.ns(tx_id, "partitions")
        writes: list[Any] = [Delete(ns, f"{p}@{txid_key(t)}") for p, t in drop]
        writes += [
            Put(ns, f"{p}@{txid_key(txid)}", encode(m, f"{tx_id} partition {p}"))
            for p, m in metas.items()
        ]
        if writes:
            self.store.apply(writes)

    def drop_partition_metas(self, tx_id: str, entries: Iterable[tuple[str, int]]) -> None:
        ns = self.ns(tx_id, "partitions")
        writes = [Delete(ns, f"{p}@{txid_key(t)}") for p, t in entries]
        if writes:
            self.store.apply(writes)


def encode(meta: Any, what: str) -> bytes:
    """JSON of ``meta``; a TypeError naming ``what`` if it is not plain data."""
    try:
        return dumps_json(meta)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{what}: batch metadata must be plain JSON data (dicts with str keys, lists, "
            f"numbers, strings, None), got {type(meta).__name__} {meta!r}: {exc}"
        ) from exc


def check_states_shared(conf: Mapping[str, Any], component: str, states: Mapping[str, Any]) -> None:
    """At submit: InvalidConfigError for a state factory whose data only one host sees
    (``shared_across_hosts`` False: SQLite files, memory) on a master whose workers may
    run on several hosts (``tupletree.cluster.master``)."""
    master = conf.get(Config.TUPLETREE_CLUSTER_MASTER)
    if master is None or is_one_host(master):
        return
    for sid, factory in states.items():
        if not getattr(factory, "shared_across_hosts", True):
            raise InvalidConfigError(
                f"Trident bolt {component!r}: state {sid!r} ({type(factory).__name__}) "
                f"keeps its data where only one host sees it, and the master {master!r} "
                f"may run the bolt's tasks on several: use a Redis or PostgreSQL state "
                f"(RedisMapState, PostgresMapState, or their sinks)",
                key=Config.TUPLETREE_CLUSTER_MASTER,
                value=master,
            )
