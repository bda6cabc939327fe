"""The data plane between workers: batched tuples and acker messages over ZeroMQ.

Each worker binds one PULL socket (its address goes to the driver, which hands the
table to every peer) and keeps one PUSH socket per peer. On Linux the PULL socket also
listens on a Unix-domain socket in the abstract namespace, named after its TCP address
(``same_host_endpoint``), and a peer whose address has the same host connects there
instead of over TCP (``tupletree.worker.same.host.ipc``, on by default).

Why: workers of one host (SparkCluster on ``local[*]``, several executors on one
machine) paid the kernel's TCP loopback path for every frame. Alternated on the 2-core
VM (notes/performance.md, 2026-11-27), two workers over the Unix socket ran the
balanced word count on 7-12% less CPU per sentence, and a crossing item took a fifth
less CPU. Two addresses with the same host are on one
machine and in one network namespace, which is also the abstract namespace's scope; so
whoever could reach the TCP port can reach the Unix socket, and no file is left behind
by a worker that is killed. Nothing else changes: frames are sealed for the TCP address
either way (a local process can write to the Unix socket as it can to the port, and is
refused alike).

An emit to a task on another worker appends the item to that task's list in the peer's
buffer (``PeerBuffer``: the remote task's inbox is a plain list). After each scheduler
round the worker calls ``flush_due``, which, when a frame is due, encodes each buffer
as one frame (distributed/frames.py says how it is laid out: columns, marshalled;
values that are not plain data pickled once per frame).

Backpressure: PUSH sockets have a small high-water mark and frames are sent without
blocking. A frame that does not fit stays queued here, ``blocked()`` turns true, and
the worker stops polling its spouts until it drains (max spout pending bounds the rest).
A receiver only reads frames while its own inboxes are under their limit, so a slow
worker fills its socket, then its senders' sockets, then stops their spouts, instead of
growing memory anywhere. A worker whose own frames are stuck stops reading too: while
the frames waiting for its peers hold ``STALLED_BYTES_LIMIT`` bytes (``congested()``),
``receive`` reads nothing, so a worker relaying from a live sender to a peer that stopped
reading fills its sender's socket (whose spouts then stop) instead of holding every
frame it relays. (A cycle of workers each stuck on the next stops alike, as Storm's
workers do; the limit is far above what a healthy cycle holds.)

A value that cannot be pickled is reported naming the component and stream, and the
tuple's trees are failed at once (``on_unserializable``), so the spout replays them.
Values that are not plain data (frames.py) are pickled: plain pickle is tried first
(fast); values it refuses are pickled with cloudpickle,
which carries classes by value: the classes of a topology file's own modules reach the
executors that way (spark/cluster.py registers them), so plain pickle cannot name them,
and their instances must be able to cross workers as they do on LocalCluster.

A frame the receiver cannot read (a value whose class pickles but does not unpickle,
or bytes that are not a frame) is reported through ``on_bad_frame`` and dropped: its
trees time out and are replayed, and the worker goes on. Storm's worker dies on a
tuple it cannot deserialize; one user value should not take down a worker here.

Each frame starts with its sender's address (outside the pickle, so that even a frame
that cannot be read says where it came from), and each side counts frames per peer address
(``sent_to``, ``received_from``), so the driver can tell that nothing is in flight
between the current processes even after a worker was restarted (frames to or from a
dead process are never matched, and need not be).

Authentication: a PULL socket takes frames from anyone who can reach it, and a pickle
runs code when it is loaded (marshal, which reads the frame's layout, is not made for
hostile input either). So every frame is sealed (distributed/sealing.py): a
ChaCha20-Poly1305 tag over the payload, under the topology's data key
(``control.data_key``: the secret reaches workers inside their Spark task, never over
this network) bound to the receiver's address and the sending link, and a number per
link that the receiver checks is above the last one it saw from that sender, so a
recorded frame replayed is refused. The receiver checks the tag before it reads
anything but the header. A frame that fails, is too short to hold a tag and a header,
or is a replay is dropped and counted per the
sender it claims (a bounded table: ``Rejections``), and reported through
``on_rejected`` at most every 10 s. Frames over ``max_frame_bytes`` are refused by
ZeroMQ before they are read (``MAXMSGSIZE``; the connection that sent one is dropped);
a sender splits a batch that would exceed it, and reports an item that alone would as
unserializable. Frames are sealed when they are handed to the socket, not when they are
encoded: a frame may be encoded before its peer's address (so its key) is known.

Tuples are not pickled as objects (costly per tuple) but as columns of plain
data; the receiver rebuilds them, reusing one TupleSource per source.
``python bench/transport.py`` measures the whole path per item, and
``bash bench/instructions_transport.sh`` counts its instructions.
"""

from __future__ import annotations

import logging
import pickle
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import zmq

from tupletree.distributed.frames import PeerBuffer, decode, encode
from tupletree.distributed.rejections import Rejections
from tupletree.distributed.sealing import (
    Link,
    ReplayGuard,
    claimed_sender,
    link_key,
    open_frame,
    seal_overhead,
)
from tupletree.runtime.inboxes import BatchInbox
from tupletree.topology.batch import Batch
from tupletree.topology.tuple import TupleSource

# A constant the compiled build reads directly, not zmq's attribute per frame.
_NOBLOCK: Final = zmq.NOBLOCK

log = logging.getLogger(__name__)

SEND_HWM = 64  # frames queued per peer socket before sends would block
# When a busy worker sends (``flush_due``): once this many items wait, or once the
# oldest has waited this long, whichever comes first; an idle worker sends at once.
FRAME_ITEMS = 512
LINGER_SECS = 0.002
PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Bytes of frames waiting for peers' sockets over which a worker stops reading its own.
STALLED_BYTES_LIMIT = 64 * 1024 * 1024
# Linux's abstract socket namespace: other systems have Unix sockets only as files.
SAME_HOST_IPC_POSSIBLE = sys.platform.startswith("linux")
# Binds tried before a worker gives up on a Unix-socket name already taken (by a process
# that chose it on purpose: the name follows a TCP port that was free a moment before).
BIND_ATTEMPTS = 3


def same_host_endpoint(address: str) -> str:
    """The Unix-domain endpoint a Transport bound at ``address`` (``tcp://host:port``)
    also listens on, in Linux's abstract namespace."""
    return "ipc://@tupletree-data/" + address.removeprefix("tcp://")


def _host(address: str) -> str:
    return address.removeprefix("tcp://").rpartition(":")[0]


class Transport:
    """A worker's end of the data plane: its PULL socket, a PUSH socket per peer.

    ``key`` authenticates every frame both ways (``control.data_key`` of the topology's
    secret). ``on_unserializable(item, exc)``: an item that cannot be sent;
    ``on_bad_frame(exc)``: an authenticated frame that cannot be read;
    ``on_rejected(report)``: frames refused, at most one report every 10 s.
    ``same_host_ipc``: listen on a Unix socket too and reach peers of the same host
    there (Linux; every worker of a topology must be given the same setting)."""

    def __init__(
        self,
        context: zmq.Context,
        host: str,
        key: bytes,
        on_unserializable: Callable[[Any, BaseException], None],
        on_bad_frame: Callable[[BaseException], None] | None = None,
        *,
        on_rejected: Callable[[str], None] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        same_host_ipc: bool = True,
    ) -> None:
        if len(key) < 16:
            raise ValueError(f"a data key needs at least 16 bytes, got {len(key)}")
        self._context = context
        self._key = key
        self.max_frame_bytes = max_frame_bytes
        self._pull = context.socket(zmq.PULL)
        self._pull.setsockopt(zmq.RCVHWM, SEND_HWM)
        self._pull.setsockopt(zmq.LINGER, 0)
        self._pull.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
        # receive asks this poller before each recv: an empty look costs ZeroMQ and
        # pyzmq about 5k instructions this way, against 28k for a NOBLOCK recv raising
        # zmq.Again, which every step paid once it had taken what was waiting.
        self._readable = zmq.Poller()
        self._readable.register(self._pull, zmq.POLLIN)
        self._host = host
        self._same_host_ipc = same_host_ipc and SAME_HOST_IPC_POSSIBLE
        self.address = self._bind(host)
        # The most a frame's payload may take: the limit less a seal's overhead.
        self._max_payload = max_frame_bytes - seal_overhead(self.address)
        self._open_key = link_key(key, self.address)
        self._ciphers: dict[bytes, Any] = {}  # per link: sealing.open_frame's cache
        self.replays = ReplayGuard()
        self._on_unserializable = on_unserializable
        self._on_bad_frame = on_bad_frame
        self._on_rejected = on_rejected
        self.rejections = Rejections("data frames that failed authentication or were replays")
        self._push: dict[int, zmq.Socket] = {}
        self._links: dict[int, Link] = {}
        self._sealed: dict[int, bytes] = {}  # per peer: a sealed frame its socket refused
        self._addresses: dict[int, str] = {}
        self.endpoints: dict[int, str] = {}  # per peer: where its PUSH socket connected
        self._buffers: dict[int, PeerBuffer] = {}
        self._stalled: dict[int, list[bytes]] = {}  # payloads, not sealed yet
        self.stalled_bytes = 0  # what _stalled holds, over all peers
        self.stalled_bytes_limit = STALLED_BYTES_LIMIT
        self._sources: dict[tuple[Any, ...], TupleSource] = {}
        self._deliver: dict[int, Callable[[Any], None]] = {}
        self._deliver_to: dict[int, Any] | None = None
        self._batch_tasks: frozenset[int] = frozenset()
        self.frames_unreadable = 0
        self.items_sent = 0  # items handed to flush (a Batch counts as one)
        self.sent_to: dict[str, int] = {}  # peer address -> frames it took
        self.received_from: dict[str, int] = {}  # sender address -> frames read
        self.frame_items = FRAME_ITEMS
        self.linger_secs = LINGER_SECS
        self._last_flush = 0.0

    def _bind(self, host: str) -> str:
        """Bind the PULL socket to a free TCP port of ``host`` (and, with same-host IPC,
        to the Unix socket named after it); return the TCP address."""
        error: zmq.ZMQError | None = None
        address = ""
        for _ in range(BIND_ATTEMPTS):
            port = self._pull.bind_to_random_port(f"tcp://{host}")
            address = f"tcp://{host}:{port}"
            if not self._same_host_ipc:
                return address
            try:
                self._pull.bind(same_host_endpoint(address))
                return address
            except zmq.ZMQError as exc:
                error = exc
                self._pull.unbind(address)
        self._pull.close(linger=0)
        raise OSError(
            f"could not listen on a Unix socket for peers on this host "
            f"({same_host_endpoint(address)}, {BIND_ATTEMPTS} tries): {error}. Set the "
            "topology's tupletree.worker.same.host.ipc to False to use TCP only"
        )

    @property
    def frames_sent(self) -> int:
        """Frames the peers' sockets took, over all peers and their processes."""
        return sum(self.sent_to.values())

    @property
    def frames_received(self) -> int:
        """Frames read (unreadable ones included), over all senders."""
        return sum(self.received_from.values())

    # -- wiring -------------------------------------------------------------------

    def remote_inbox(self, task: int, worker: int) -> list[Any]:
        """The inbox standing for ``task`` on peer ``worker``: a list emptied at flushes."""
        buffer = self._buffers.get(worker)
        if buffer is None:
            buffer = self._buffers[worker] = PeerBuffer()
        return buffer.inbox(task)

    def set_peers(self, addresses: dict[int, str], me: int) -> None:
        """``set_peer`` for every worker of a peer table but this one (``me``)."""
        for worker, address in addresses.items():
            if worker != me:
                self.set_peer(worker, address)

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
            dropped = self._stalled.pop(worker, None)
            if dropped:
                self.stalled_bytes -= sum([len(payload) for payload in dropped])
            self._sealed.pop(worker, None)
        sock = self._context.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue only on a completed connection
        endpoint = address
        if self._same_host_ipc and _host(address) == self._host:
            endpoint = same_host_endpoint(address)
        sock.connect(endpoint)
        self.endpoints[worker] = endpoint
        self._push[worker] = sock
        self._addresses[worker] = address
        self._links[worker] = Link(
            self._key, self.address, address, time.time_ns(), secrets.token_bytes(8)
        )

    # -- sending ------------------------------------------------------------------

    def flush_due(self, now: float, idle: bool) -> None:
        """Flush if it is time: the worker is idle (nothing else to do, so no reason to
        wait), FRAME_ITEMS items wait, or LINGER_SECS passed since the last flush.

        Why not after every scheduler round: a busy worker's rounds are short, and a
        frame per round carried ~50 items, so the per-frame costs (pickle set-up, a
        ZeroMQ message, a poll and a receive on the other side) weighed on every item;
        512 items or 2 ms measured best (notes/performance.md). Storm makes the same
        trade (``topology.producer.batch.size``, flushed every
        ``topology.batch.flush.interval.millis``, 1 ms).
        """
        if (
            idle
            or now - self._last_flush >= self.linger_secs
            or self.buffered() >= self.frame_items
        ):
            self.flush()
            self._last_flush = now

    def buffered(self) -> int:
        """Items waiting for the next flush, over all peers."""
        return sum([len(buffer) for buffer in self._buffers.values()])

    def flush(self) -> None:
        """Serialize each peer's buffer into one frame and send what the sockets take."""
        for worker, buffer in self._buffers.items():
            if not len(buffer):
                continue
            taken = buffer.take()
            self.items_sent += sum([len(items) for items in taken.values()])
            frames = self._serialize(taken)
            if frames:
                self._stalled.setdefault(worker, []).extend(frames)
                self.stalled_bytes += sum([len(payload) for payload in frames])
        for worker, payloads in self._stalled.items():
            sock = self._push.get(worker)
            if sock is None:
                continue  # the peer's address is not known yet: keep the frames
            link = self._links[worker]
            sent = 0
            while payloads:
                # Sealed once: a frame the socket refused keeps its number for the retry.
                frame = self._sealed.pop(worker, None) or link.seal(payloads[0])
                try:
                    sock.send(frame, _NOBLOCK)
                except zmq.Again:
                    self._sealed[worker] = frame
                    break
                self.stalled_bytes -= len(payloads.pop(0))
                sent += 1
            if sent:
                address = self._addresses[worker]
                self.sent_to[address] = self.sent_to.get(address, 0) + sent

    def blocked(self) -> bool:
        """True while frames wait for a peer's socket to take them (backpressure)."""
        return any(self._stalled.values())

    def congested(self) -> bool:
        """True while the frames waiting for peers hold ``stalled_bytes_limit`` bytes or
        more: ``receive`` reads nothing until they drain."""
        return self.stalled_bytes >= self.stalled_bytes_limit

    def _serialize(self, lists: dict[int, list[Any]]) -> list[bytes]:
        """The payloads of frames for these items: one, unless its frame would exceed
        the maximum frame size (then the batch is halved until each part fits, and a
        lone Batch is cut between its trees' runs)."""
        try:
            body = encode(lists, _dumps)
        except Exception:
            return self._serialize_each(lists)
        if len(body) <= self._max_payload:
            return [body]
        items = [(task, item) for task, its in lists.items() for item in its]
        if len(items) == 1:
            task, item = items[0]
            parts = item._split() if type(item) is Batch else None
            if parts is not None:  # a BatchBolt's emits: cut between two trees' runs
                return self._serialize({task: [parts[0]]}) + self._serialize({task: [parts[1]]})
            self._on_unserializable(
                item,
                ValueError(
                    f"it takes {len(body):,} bytes, over the {self.max_frame_bytes:,} "
                    "bytes a frame between workers may hold"
                ),
            )
            return []
        half = len(items) // 2
        return self._serialize(_grouped(items[:half])) + self._serialize(_grouped(items[half:]))

    def _serialize_each(self, lists: dict[int, list[Any]]) -> list[bytes]:
        """Find the items that cannot be serialized (each alone), report them, send
        the rest."""
        good: dict[int, list[Any]] = {}
        for task, items in lists.items():
            for item in items:
                try:
                    encode({task: [item]}, _dumps)
                except Exception as exc:
                    self._on_unserializable(item, exc)
                else:
                    good.setdefault(task, []).append(item)
        return self._serialize(good) if good else []

    # -- receiving ----------------------------------------------------------------

    def receive(self, inboxes: dict[int, Any], max_frames: int) -> int:
        """Move up to ``max_frames`` frames into local inboxes; return items moved.
        Reads nothing while ``congested()``: what this worker would make of them could
        not be sent either (backpressure reaches the senders through their sockets)."""
        if self.stalled_bytes >= self.stalled_bytes_limit:
            return 0
        if self._deliver_to is not inboxes:
            # A worker's inboxes never change once it is built: bind their extends once.
            self._deliver = {task: inbox.extend for task, inbox in inboxes.items()}
            self._deliver_to = inboxes
            # A BatchBolt's task takes a frame's runs as Batches (runtime/inboxes.py).
            self._batch_tasks = frozenset(
                task for task, inbox in inboxes.items() if isinstance(inbox, BatchInbox)
            )
        moved = 0
        pull = self._pull
        readable = self._readable
        for _ in range(max_frames):
            if not readable.poll(0):
                break
            try:
                # Copied into bytes: for frames of a few kilobytes, pyzmq's zero-copy
                # Frame object costs more than the copy (~5k instructions a frame against
                # a memcpy; notes/performance.md, stop 41).
                data = pull.recv(_NOBLOCK)
            except zmq.Again:  # not expected after POLLIN; harmless if it happens
                break
            opened = open_frame(self._open_key, data, self._ciphers)
            if opened is None:
                self._reject(claimed_sender(data), f"{len(data)} bytes, bad or missing mac")
                continue
            sender, sequence, payload = opened
            last = self.replays.admit(sender, sequence)
            if last is not None:
                self._reject(
                    sender, f"frame number {sequence} not above the last one seen, {last}: a replay"
                )
                continue
            self.received_from[sender] = self.received_from.get(sender, 0) + 1
            try:
                moved += decode(
                    payload, self._sources, self._deliver, batch_tasks=self._batch_tasks
                )
            except Exception as exc:
                # Items delivered before the error stay delivered; the rest are lost and
                # their trees time out. Counted as received all the same: nothing more
                # of this frame is in flight.
                self.frames_unreadable += 1
                if self._on_bad_frame is not None:
                    self._on_bad_frame(exc)
                else:
                    log.error("dropped a frame that could not be read: %r", exc)
        return moved

    def _reject(self, sender: str, reason: str) -> None:
        """Count a frame refused (it is never unpickled), by the sender it claims."""
        report = self.rejections.reject(sender, reason, time.monotonic())
        if report is None:
            return
        if self._on_rejected is not None:
            self._on_rejected(report)
        else:
            log.warning("%s: %s", self.address, report)

    @property
    def socket(self) -> zmq.Socket:
        """The PULL socket, for a poller that waits when the worker is idle."""
        return self._pull

    def close(self) -> None:
        for sock in self._push.values():
            sock.close(linger=0)
        self._pull.close(linger=0)


def _grouped(items: list[tuple[int, Any]]) -> dict[int, list[Any]]:
    """(task, item) pairs back into task -> items, in order."""
    lists: dict[int, list[Any]] = {}
    for task, item in items:
        lists.setdefault(task, []).append(item)
    return lists


def _dumps(obj: Any) -> bytes:
    """Plain pickle (fast); cloudpickle for what it refuses: classes of modules
    registered to be pickled by value, classes defined in functions. The receiver reads
    either with plain ``pickle.loads`` (cloudpickle's output only needs cloudpickle
    importable there)."""
    try:
        return pickle.dumps(obj, PICKLE_PROTOCOL)
    except Exception:
        from pyspark import cloudpickle

        return cloudpickle.dumps(obj, PICKLE_PROTOCOL)
