"""The data plane between workers: batched tuples and acker messages over ZeroMQ.

Each worker binds one PULL socket (its address goes to the driver, which hands the
table to every peer) and keeps one PUSH socket per peer. An emit to a task on another
worker appends ``(task, item)`` to that peer's buffer (``RemoteInbox``, the same
``append`` as a local inbox); at the end of each scheduler round ``flush`` pickles each
buffer once and sends it as one frame, so values are serialized once per batch and
TupleSources once per batch (pickle memoizes them).

Backpressure: PUSH sockets have a small high-water mark and frames are sent without
blocking. A frame that does not fit stays queued here, ``blocked()`` turns true, and
the worker stops polling its spouts until it drains (max spout pending bounds the rest).
A receiver only reads frames while its own inboxes are under their limit, so a slow
worker fills its socket, then its senders' sockets, then stops their spouts, instead of
growing memory anywhere.

A value that cannot be pickled is reported naming the component and stream, and the
tuple's trees are failed at once (``on_unserializable``), so the spout replays them.

Frame encoding: Tuples are not pickled as objects (about 3 us each, measured) but as
plain ``(task, values, source_index, root, edge, roots)`` entries with a per-frame table of their
sources (component, stream, task, fields); acker messages and replies are already
plain ``(task, item)``. Plain tuples pickle in about 0.5 us per entry and unpickle in
0.9 us. The receiver rebuilds Tuples, reusing one TupleSource per source.
``python bench/transport.py`` measures the whole path per item (send ~1.5 us including
the Tuple, receive ~1.4 us); a columnar variant (per source: lists of tasks, values,
roots) measured the same within noise and was not kept.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import zmq

from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

SEND_HWM = 64  # frames queued per peer socket before sends would block
PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


class RemoteInbox:
    """Stands in for a remote task's inbox: buffers items for the next flush."""

    __slots__ = ("_buffer", "_task")

    def __init__(self, buffer: list[tuple[int, Any]], task: int) -> None:
        self._buffer = buffer
        self._task = task

    def append(self, item: Any) -> None:
        self._buffer.append((self._task, item))

    def __len__(self) -> int:
        return 0  # nothing queued *here* counts against local backpressure


class Transport:
    def __init__(
        self,
        context: zmq.Context,
        host: str,
        on_unserializable: Callable[[Any, BaseException], None],
    ) -> None:
        self._context = context
        self._pull = context.socket(zmq.PULL)
        self._pull.setsockopt(zmq.RCVHWM, SEND_HWM)
        self._pull.setsockopt(zmq.LINGER, 0)
        port = self._pull.bind_to_random_port(f"tcp://{host}")
        self.address = f"tcp://{host}:{port}"
        self._on_unserializable = on_unserializable
        self._push: dict[int, zmq.Socket] = {}
        self._addresses: dict[int, str] = {}
        self._buffers: dict[int, list[tuple[int, Any]]] = {}
        self._stalled: dict[int, list[bytes]] = {}
        self._sources: dict[tuple[Any, ...], TupleSource] = {}
        self.frames_sent = 0
        self.frames_received = 0

    # -- wiring -------------------------------------------------------------------

    def remote_inbox(self, task: int, worker: int) -> RemoteInbox:
        return RemoteInbox(self._buffers.setdefault(worker, []), task)

    def set_peer(self, worker: int, address: str) -> None:
        """(Re)connect to a peer; a restarted worker comes back with a new address.

        Frames stalled for the old address are dropped: they were addressed to a
        process that is gone, and their trees time out and are replayed.
        """
        if self._addresses.get(worker) == address:
            return
        old = self._push.pop(worker, None)
        if old is not None:
            old.close(linger=0)
            self._stalled.pop(worker, None)
        sock = self._context.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue only on a completed connection
        sock.connect(address)
        self._push[worker] = sock
        self._addresses[worker] = address

    # -- sending ------------------------------------------------------------------

    def flush(self) -> None:
        """Serialize each peer's buffer into one frame and send what the sockets take."""
        for worker, buffer in self._buffers.items():
            if not buffer:
                continue
            items = buffer[:]
            buffer.clear()
            frame = self._serialize(items)
            if frame is not None:
                self._stalled.setdefault(worker, []).append(frame)
        for worker, frames in self._stalled.items():
            sock = self._push.get(worker)
            if sock is None:
                continue  # the peer's address is not known yet: keep the frames
            while frames:
                try:
                    sock.send(frames[0], zmq.NOBLOCK)
                except zmq.Again:
                    break
                frames.pop(0)
                self.frames_sent += 1

    def blocked(self) -> bool:
        """True while frames wait for a peer's socket to take them (backpressure)."""
        return any(self._stalled.values())

    def _serialize(self, items: list[tuple[int, Any]]) -> bytes | None:
        sources, entries = encode(items)
        try:
            return pickle.dumps((sources, entries), PICKLE_PROTOCOL)
        except Exception:
            pass
        # Find the culprits, report them, send the rest.
        good = []
        for (task, item), entry in zip(items, entries, strict=True):
            try:
                pickle.dumps(entry, PICKLE_PROTOCOL)
            except Exception as exc:
                self._on_unserializable(item, exc)
            else:
                good.append((task, item))
        if not good:
            return None
        return pickle.dumps(encode(good), PICKLE_PROTOCOL)

    # -- receiving ----------------------------------------------------------------

    def receive(self, inboxes: dict[int, Any], max_frames: int) -> int:
        """Move up to ``max_frames`` frames into local inboxes; return items moved."""
        moved = 0
        pull = self._pull
        for _ in range(max_frames):
            try:
                frame = pull.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            self.frames_received += 1
            moved += self._decode(pickle.loads(frame.buffer), inboxes)
        return moved

    def _decode(self, frame: tuple[list[Any], list[tuple[Any, ...]]], inboxes: dict) -> int:
        table, entries = frame
        known = self._sources
        sources = []
        for key in table:
            src = known.get(key)
            if src is None:
                component, stream, task, fields = key
                src = known[key] = TupleSource(component, stream, task, Fields(list(fields)))
            sources.append(src)
        for entry in entries:
            if len(entry) == 6:
                task, values, i, root, edge, roots = entry
                inboxes[task].append(Tuple(values, sources[i], root, edge, roots))
            else:
                inboxes[entry[0]].append(entry[1])
        return len(entries)

    @property
    def socket(self) -> zmq.Socket:
        """The PULL socket, for a poller that waits when the worker is idle."""
        return self._pull

    def close(self) -> None:
        for sock in self._push.values():
            sock.close(linger=0)
        self._pull.close(linger=0)


def encode(items: list[tuple[int, Any]]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Plain entries for a frame, and the table of the Tuple sources they refer to."""
    index: dict[TupleSource, int] = {}
    table: list[tuple[Any, ...]] = []
    entries: list[tuple[Any, ...]] = []
    for task, item in items:
        if type(item) is Tuple:
            src = item._src
            i = index.get(src)
            if i is None:
                i = index[src] = len(table)
                table.append((src.component, src.stream, src.task, tuple(src.fields)))
            entries.append((task, item.values, i, item._root, item._edge, item._roots))
        else:
            entries.append((task, item))
    return table, entries
