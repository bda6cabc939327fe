"""The data plane's frame encoding and backpressure, without Spark (two sockets, one
process)."""

from __future__ import annotations

import os
import pickle
import threading
from collections import deque
from typing import Any

import zmq

from tests.spark.workerfns import NotRebuildable
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.sealing import Link
from tupletree.distributed.transport import Transport
from tupletree.runtime.inboxes import BatchInbox
from tupletree.topology.batch import Batch
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

KEY = data_key(new_secret())


def make_pair() -> tuple[Transport, Transport, list[Any]]:
    ctx = zmq.Context.instance()
    bad: list[Any] = []
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: bad.append((item, exc)))
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: bad.append((item, exc)))
    a.set_peer(1, b.address)
    return a, b, bad


def receive_all(b: Transport, inboxes: dict[int, deque], expected: int) -> None:
    poller = zmq.Poller()
    poller.register(b.socket, zmq.POLLIN)
    moved = 0
    for _ in range(200):
        moved += b.receive(inboxes, 100)
        if moved >= expected:
            return
        poller.poll(20)
    raise AssertionError(f"received {moved} of {expected}")


def test_tuples_and_acker_messages_cross_intact() -> None:
    """Values, source, stream, roots and plain acker messages arrive as sent."""
    a, b, bad = make_pair()
    src = TupleSource("split", "words", 7, Fields(["word", "n"]))
    inbox = a.remote_inbox(3, worker=1)
    acker = a.remote_inbox(9, worker=1)
    inbox.append(in_trees(["hello", 1], src, {11: 22, 33: 44}))
    inbox.append(Tuple(["world", 2], src))
    inbox.append(Tuple(["one tree", 3], src, 55, 66))
    acker.append((1, 11, 5, 0))
    flush_all(a)
    inboxes = {3: deque(), 9: deque()}
    receive_all(b, inboxes, 4)
    first, second, third = inboxes[3]
    assert first.values == ["hello", 1] and first._tree_edges() == {11: 22, 33: 44}
    assert first.source_component == "split" and first.source_stream == "words"
    assert first.source_task == 7 and first.get("n") == 1 and first._ack_val == 0
    assert second._tree_edges() == {} and second._src is first._src
    assert third._tree_edges() == {55: 66} and (third._root, third._edge) == (55, 66)
    assert list(inboxes[9]) == [(1, 11, 5, 0)]
    assert bad == []
    a.close()
    b.close()


class RecordingSocket:
    """Stands in for a peer's PUSH socket: what an eavesdropper on the path records,
    passed on to the real socket."""

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock
        self.frames: list[bytes] = []

    def send(self, frame: bytes, flags: int = 0) -> None:
        self.sock.send(frame, flags)
        self.frames.append(bytes(frame))

    def close(self, linger: int = 0) -> None:
        self.sock.close(linger=linger)


def test_a_recorded_frame_replayed_is_refused_and_delivers_nothing() -> None:
    """As an attacker on the path: frames recorded between two workers and pushed again
    (each of them, later, and all of them at once) are refused as replays, named as
    such, and their tuples and acker messages are not delivered a second time; a frame
    recorded on the way to one worker does not open at another; the link goes on."""
    ctx = zmq.Context.instance()
    reports: list[str] = []
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, on_rejected=reports.append)
    c = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    a.set_peer(1, b.address)
    tap = a._push[1] = RecordingSocket(a._push[1])
    src = TupleSource("split", "default", 3, Fields(["word"]))
    inboxes = {3: deque(), 9: deque()}
    for word in ("first", "second"):
        a.remote_inbox(3, worker=1).append(Tuple([word], src, 11, 22))
        a.remote_inbox(9, worker=1).append((1, 11, 22, 0))
        flush_all(a)
        receive_all(b, inboxes, 2)
    assert len(tap.frames) == 2 and b.rejections.total == 0

    attacker = ctx.socket(zmq.PUSH)
    attacker.setsockopt(zmq.LINGER, 0)
    attacker.connect(b.address)
    for frame in tap.frames + tap.frames[::-1]:
        attacker.send(frame)
    a.remote_inbox(3, worker=1).append(Tuple(["third"], src, 11, 33))
    flush_all(a)
    receive_all(b, inboxes, 1)
    poller = zmq.Poller()
    poller.register(b.socket, zmq.POLLIN)
    for _ in range(100):
        if b.rejections.total == 4:
            break
        poller.poll(20)
        b.receive(inboxes, 10)
    assert [t.values[0] for t in inboxes[3]] == ["first", "second", "third"]
    assert list(inboxes[9]) == [(1, 11, 22, 0)] * 2, "a replayed ack would undo its tree's XOR"
    assert b.rejections.total == 4 and b.rejections.by_sender == {a.address: 4}
    assert "replay" in reports[0] and a.address in reports[0]
    assert b.received_from == {a.address: 3}

    # Recorded on the way to b, pushed to c: sealed for b's address, so it does not open.
    to_c = ctx.socket(zmq.PUSH)
    to_c.setsockopt(zmq.LINGER, 0)
    to_c.connect(c.address)
    to_c.send(tap.frames[0])
    elsewhere = {3: deque(), 9: deque()}
    for _ in range(100):
        c.receive(elsewhere, 10)
        if c.rejections.total:
            break
        poller.poll(20)
    assert c.rejections.total == 1 and not elsewhere[3] and not elsewhere[9]
    for sock in (attacker, to_c):
        sock.close()
    for t in (a, b, c):
        t.close()


def test_unpicklable_value_is_reported_and_the_rest_sent() -> None:
    """One unpicklable tuple is handed to on_unserializable; its frame-mates still go."""
    a, b, bad = make_pair()
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    inbox = a.remote_inbox(3, worker=1)
    lock_tuple = Tuple([threading.Lock()], src, 1, 2)
    inbox.append(lock_tuple)
    inbox.append(Tuple(["fine"], src))
    flush_all(a)
    inboxes = {3: deque()}
    receive_all(b, inboxes, 1)
    assert [t.values for t in inboxes[3]] == [["fine"]]
    assert len(bad) == 1 and bad[0][0] is lock_tuple
    a.close()
    b.close()


def test_unreachable_peer_blocks_instead_of_growing() -> None:
    """With no peer listening, frames stay queued and blocked() reports backpressure."""
    ctx = zmq.Context.instance()
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    a.set_peer(1, "tcp://127.0.0.1:1")  # nothing listens there
    a.remote_inbox(3, worker=1).append((1, 2, 3, 0))
    a.flush()
    assert a.blocked()
    assert a.frames_sent == 0
    # Each flush retries the frame: it was sealed once (a MAC over the whole payload),
    # and keeps its number, rather than being sealed again at every retry.
    sealed = a._links[1].sequence
    for _ in range(3):
        a.flush()
    assert a._links[1].sequence == sealed and a.blocked()
    a.close()


def test_busy_worker_sends_full_frames_or_after_the_linger() -> None:
    """flush_due holds a busy worker's items until FRAME_ITEMS wait or LINGER_SECS
    passed; an idle worker sends at once. Nothing is lost or reordered either way."""
    a, b, _ = make_pair()
    a.frame_items, a.linger_secs = 5, 0.002
    src = TupleSource("split", "default", 7, Fields(["n"]))
    inbox = a.remote_inbox(3, worker=1)
    inbox.append(Tuple([0], src))
    a.flush_due(100.0, idle=False)  # the first flush: nothing sent before
    assert a.buffered() == 0
    for n in range(1, 5):
        inbox.append(Tuple([n], src))
        a.flush_due(100.0005, idle=False)
    assert a.buffered() == 4  # busy, 4 < 5 items, 0.5 ms
    inbox.append(Tuple([5], src))
    a.flush_due(100.0006, idle=False)  # 5 items: a full frame
    assert a.buffered() == 0
    inbox.append(Tuple([6], src))
    a.flush_due(100.0007, idle=False)
    assert a.buffered() == 1
    a.flush_due(100.0027, idle=False)  # 2 ms since the last flush
    assert a.buffered() == 0
    inbox.append(Tuple([7], src))
    a.flush_due(100.0028, idle=True)  # idle: at once
    assert a.buffered() == 0
    for _ in range(50):  # frames the socket did not take yet go out at later flushes
        if not a.blocked():
            break
        threading.Event().wait(0.02)
        a.flush()
    inboxes = {3: deque()}
    receive_all(b, inboxes, 8)
    assert [t[0] for t in inboxes[3]] == list(range(8))
    assert b.frames_received == 4  # [0], [1..5], [6], [7]
    a.close()
    b.close()


def test_items_appended_while_reporting_an_unpicklable_one_are_sent() -> None:
    """Reporting an unpicklable tuple fails its tree, which appends a FAIL to the acker's
    inbox; when that acker is on the same peer, the FAIL goes in the next frame instead
    of being lost with the frame being built."""
    ctx = zmq.Context.instance()
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)

    def fail_tree(item: Any, exc: BaseException) -> None:  # as Worker.fail_unserializable
        a.remote_inbox(9, worker=1).append((2, item._root, 0, 0))  # acker task 9, on b

    a = Transport(ctx, "127.0.0.1", KEY, fail_tree)
    a.set_peer(1, b.address)
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    a.remote_inbox(3, worker=1).append(Tuple([threading.Lock()], src, 77, 88))
    for _ in range(50):
        a.flush()
        if not a.blocked() and a.buffered() == 0:
            break
        threading.Event().wait(0.02)
    inboxes = {3: deque(), 9: deque()}
    receive_all(b, inboxes, 1)
    assert list(inboxes[9]) == [(2, 77, 0, 0)] and not inboxes[3]
    a.close()
    b.close()


def flush_all(a: Transport) -> None:
    """Flush until nothing is stalled: up to 5 s for the connection (a loaded machine)."""
    for _ in range(250):
        a.flush()
        if not a.blocked():
            return
        threading.Event().wait(0.02)
    raise AssertionError("frames still stalled")


def test_values_plain_pickle_refuses_cross_by_value() -> None:
    """An instance of a class plain pickle cannot name (here, defined in a function; on
    Spark, a class of the topology file's modules, carried by value) crosses through
    cloudpickle; its frame-mates and later frames are unaffected, and two frames'
    instances share one class on the receiving side."""

    class Reading:
        def __init__(self, word: str, n: int) -> None:
            self.word, self.n = word, n

    a, b, bad = make_pair()
    src = TupleSource("sensor", "default", 1, Fields(["reading"]))
    inbox = a.remote_inbox(3, worker=1)
    inbox.append(Tuple([Reading("alpha", 1)], src, 11, 12))
    inbox.append(Tuple(["plain"], src))
    flush_all(a)
    inbox.append(Tuple([Reading("beta", 2)], src))
    flush_all(a)
    inboxes = {3: deque()}
    receive_all(b, inboxes, 3)
    first, plain, second = (t.values[0] for t in inboxes[3])
    assert (first.word, first.n, second.word, second.n) == ("alpha", 1, "beta", 2)
    assert type(first) is type(second) and type(first).__name__ == "Reading"
    assert plain == "plain" and inboxes[3][0]._tree_edges() == {11: 12}
    assert bad == []
    a.close()
    b.close()


def test_frame_that_cannot_be_read_is_reported_and_the_worker_goes_on() -> None:
    """A frame whose values cannot be rebuilt is dropped and reported through
    on_bad_frame (the receiver does not raise), counted as received from its sender,
    and the frames after it are delivered."""
    ctx = zmq.Context.instance()
    lost: list[BaseException] = []
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, lost.append)
    a.set_peer(1, b.address)
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    inbox = a.remote_inbox(3, worker=1)
    inbox.append(Tuple([NotRebuildable("row 7", "bad date")], src, 5, 6))
    flush_all(a)
    inbox.append(Tuple(["after"], src))
    flush_all(a)
    inboxes = {3: deque()}
    receive_all(b, inboxes, 1)
    assert [t.values for t in inboxes[3]] == [["after"]]
    assert len(lost) == 1 and isinstance(lost[0], TypeError)
    assert b.frames_unreadable == 1
    assert a.sent_to == {b.address: 2} and b.received_from == {a.address: 2}
    a.close()
    b.close()


class RunsCode:
    """A pickle that runs a shell command when it is loaded (the attack)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_stranger_pushing_pickles_to_a_worker_runs_nothing(tmp_path) -> None:
    """As the attacker: frames pushed from another socket to a worker's PULL address
    (a bare pickle, the old header-then-pickle layout, a mac made with another key or
    for another worker, a real peer's name with a wrong mac, a frame over the size
    limit) are never
    unpickled: the marker file their pickle would write stays absent. Each is counted
    under the sender it claims, reported once (rate-limited), kept out of the frame
    counts the driver compares, and a real peer's frame still gets through."""
    marker = tmp_path / "pwned"
    evil = pickle.dumps(RunsCode(str(marker)))
    # The attack works on a reader that unpickles what it gets: prove it, once.
    pickle.loads(evil)
    assert marker.exists()
    marker.unlink()

    reports: list[str] = []
    ctx = zmq.Context.instance()
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    b = Transport(
        ctx,
        "127.0.0.1",
        KEY,
        lambda item, exc: None,
        on_rejected=reports.append,
        max_frame_bytes=64 * 1024,
    )
    a.set_peer(1, b.address)
    attacker = ctx.socket(zmq.PUSH)
    attacker.setsockopt(zmq.LINGER, 0)
    attacker.connect(b.address)
    stranger = len(b"tcp://evil:1").to_bytes(2, "big") + b"tcp://evil:1"
    wrong_key = data_key(new_secret())
    for frame in (
        evil,
        stranger + evil,
        Link(wrong_key, "tcp://evil:1", b.address, 0, bytes(8)).seal(evil),
        Link(wrong_key, a.address, b.address, 0, bytes(8)).seal(evil),
        # The right key, sealed for another worker: does not open here either.
        Link(KEY, a.address, "tcp://127.0.0.1:9", 0, bytes(8)).seal(evil),
    ):
        attacker.send(frame)
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    a.remote_inbox(3, worker=1).append(Tuple(["real"], src))
    flush_all(a)
    inboxes = {3: deque()}
    poller = zmq.Poller()
    poller.register(b.socket, zmq.POLLIN)
    for _ in range(200):
        b.receive(inboxes, 10)
        if inboxes[3] and b.rejections.total == 5:
            break
        poller.poll(20)
    assert not marker.exists(), "a stranger's pickle ran in the worker"
    assert [t.values for t in inboxes[3]] == [["real"]]
    assert b.rejections.total == 5
    # Counted under the sender each claims (unauthenticated, so whatever bytes stand
    # where a header would): those that named a real peer are counted under its name.
    assert sum(b.rejections.by_sender.values()) == 5 and b.rejections.by_sender[a.address] == 2
    assert len(reports) == 1 and "dropped 1 data frames that failed authentication" in reports[0]
    assert b.received_from == {a.address: 1}, "refused frames are not counted as a peer's"

    # Over the size limit: ZeroMQ drops it (and the attacker's connection) unread.
    attacker.send(b"x" * (128 * 1024))
    a.remote_inbox(3, worker=1).append(Tuple(["after"], src))
    flush_all(a)
    receive_all(b, inboxes, 1)
    assert [t.values for t in inboxes[3]][-1] == ["after"]
    assert b.rejections.total == 5
    attacker.close()
    a.close()
    b.close()


def test_a_batch_over_the_frame_limit_is_split_and_an_item_over_it_reported() -> None:
    """A sender never makes a frame its peer would refuse: a batch that would be too
    large goes as several frames, and a single item too large is reported as
    unserializable (its tree is failed, so its spout replays or gives up)."""
    ctx = zmq.Context.instance()
    bad: list[Any] = []
    a = Transport(
        ctx, "127.0.0.1", KEY, lambda item, exc: bad.append((item, exc)), max_frame_bytes=8192
    )
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, max_frame_bytes=8192)
    a.set_peer(1, b.address)
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    inbox = a.remote_inbox(3, worker=1)
    for i in range(40):
        inbox.append(Tuple([f"{i:04d}" + "x" * 500], src))
    huge = Tuple(["y" * 20_000], src, 7, 8)
    inbox.append(huge)
    flush_all(a)
    inboxes = {3: deque()}
    receive_all(b, inboxes, 40)
    assert [t[0][:4] for t in inboxes[3]] == [f"{i:04d}" for i in range(40)]
    assert b.frames_received > 2
    assert len(bad) == 1 and bad[0][0] is huge and "bytes a frame between workers" in str(bad[0][1])
    a.close()
    b.close()


def test_a_batch_item_over_the_frame_limit_is_cut_between_trees_not_inside_one() -> None:
    """A BatchBolt's emits to one task travel as one Batch item. Too large for a frame,
    it is cut at run boundaries, so each tree's rows (and the one edge a run to a
    BatchBolt carries) arrive in one part; a run that alone is too large is reported."""
    ctx = zmq.Context.instance()
    bad: list[Any] = []
    a = Transport(
        ctx, "127.0.0.1", KEY, lambda item, exc: bad.append((item, exc)), max_frame_bytes=8192
    )
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, max_frame_bytes=8192)
    a.set_peer(1, b.address)
    src = TupleSource("split", "default", 2, Fields(["w"]))
    rows = [
        Tuple([f"{i:03d}" + "x" * 400], src, 100 + i // 5, 1 if i % 5 == 0 else 0)
        for i in range(40)
    ]
    a.remote_inbox(3, worker=1).append(Batch.of_tuples(rows))
    huge = Batch.of_tuples([Tuple(["y" * 5000], src, 9, 1), Tuple(["z" * 5000], src, 9, 0)])
    a.remote_inbox(3, worker=1).append(huge)
    flush_all(a)
    inboxes = {3: BatchInbox()}
    receive_all(b, inboxes, 40)
    got = list(inboxes[3])
    assert len(got) > 1 and all(type(x) is Batch for x in got)
    assert [v for x in got for v in x.column("w")] == [t.values[0] for t in rows]
    for part in got:  # every tree whole in one part, its edge with it
        trees = part._rows_per_tree()
        assert all(n == 5 for n in trees.values())
        acks: dict[int, int] = {}
        part.tree_acks(acks)
        assert acks == dict.fromkeys(trees, 1)
    assert len(bad) == 1 and bad[0][0] is huge
    a.close()
    b.close()


class CountingSocket:
    """A PULL socket that counts its receives, for the transport to read from."""

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock
        self.recvs = 0

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        self.recvs += 1
        return self.sock.recv(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_a_receive_takes_at_most_max_frames_and_an_empty_one_takes_nothing() -> None:
    """receive asks a poller before each recv: it stops at ``max_frames``, keeps the rest
    for the next call, and finds nothing when nothing waits, without a recv that comes
    back empty (a ``zmq.Again`` costs ~28k instructions; notes/performance.md)."""
    a, b, _ = make_pair()
    counting = b._pull = CountingSocket(b._pull)  # type: ignore[assignment]
    src = TupleSource("split", "default", 1, Fields(["word"]))
    inbox = a.remote_inbox(3, worker=1)
    inboxes: dict[int, deque] = {3: deque()}
    assert b.receive(inboxes, 10) == 0
    for word in ("one", "two", "three"):  # a frame each
        inbox.append(Tuple([word], src))
        flush_all(a)
    assert a.frames_sent == 3
    calls = []
    for _ in range(200):
        if len(inboxes[3]) == 3:
            break
        calls.append(b.receive(inboxes, 1))
        b.socket.poll(20)
    assert max(calls) == 1  # one frame of one item a call, never more
    assert [t[0] for t in inboxes[3]] == ["one", "two", "three"]
    assert b.receive(inboxes, 10) == 0
    assert counting.recvs == 3  # one per frame; none that found nothing
    a.close()
    b.close()


def test_the_transfer_batching_keys_set_when_a_busy_worker_flushes() -> None:
    """topology.transfer.batch.size and topology.batch.flush.interval.millis, as a worker
    applies them (worker_main.apply_transfer_batching): 3 items make a frame, and a
    busy worker holds fewer for 10 ms, not 2."""
    from tupletree.config import Config, validate
    from tupletree.distributed.worker_main import apply_transfer_batching

    a, b, _ = make_pair()
    conf = validate(
        {Config.TOPOLOGY_TRANSFER_BATCH_SIZE: 3, Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: 10}
    )
    apply_transfer_batching(a, conf)
    src = TupleSource("split", "default", 7, Fields(["n"]))
    inbox = a.remote_inbox(3, worker=1)
    a.flush_due(100.0, idle=False)  # the first flush
    inbox.extend([Tuple([0], src), Tuple([1], src)])
    a.flush_due(100.001, idle=False)
    assert a.buffered() == 2  # 2 < 3 items, 1 ms
    inbox.append(Tuple([2], src))
    a.flush_due(100.002, idle=False)  # 3 items: a frame
    assert a.buffered() == 0
    inbox.append(Tuple([3], src))
    a.flush_due(100.007, idle=False)  # 5 ms since the last flush: not yet
    assert a.buffered() == 1
    a.flush_due(100.0121, idle=False)  # 10 ms
    assert a.buffered() == 0
    flush_all(a)  # frames the socket did not take yet
    inboxes = {3: deque()}
    receive_all(b, inboxes, 4)
    assert [t[0] for t in inboxes[3]] == list(range(4))
