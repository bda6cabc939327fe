"""What an item that crosses workers costs, and nothing else: ``python bench/crossing.py
[frames] [batch] [words|sentences|acks|one]``. ``bash bench/instructions_crossing.sh
[batch] [KIND]`` counts its instructions per item.

With a KIND, each frame carries only that part of the mix (``one``: a single acker
message), which splits the cost into a frame's own and each kind's per item.

With ``batch``, the same items cross as a BatchBolt's do (topology/batch.py): the words
and sentences are sent as Batches (a BatchBolt's buffered emits: one per tree's run of
words, one for the sentences) and the receiving tasks take Batches, so no Tuple is made
on either side; the acker messages are as before.

Two Transports in one process, on loopback. Each frame carries the mix the 2-worker word
count sends (bench/two_workers.py, counted per frame on both workers: per sentence 0.5
sentence tuples, each its own tree; 5 word tuples, the words of one tree in a row; 1.5
acker messages): 16 sentences, 160 words in runs of 5 per tree, 48 acks, 224 items.

What is counted is the crossing: take (the peer buffer's lists copied out), encode,
sign, send, receive, check, decode (a Tuple built per tuple, as the receiving inbox
gets it), deliver, and the received items freed. The items sent are built once, before
the loop: building a Tuple is an emit's cost whether its target is local or not, and so
is freeing one after its bolt ran (a crossing frees the sender's Tuple and the
receiver's; a local delivery one: the one freed here stands for the difference).
bench/transport.py measures the older way, Tuples built per frame by interpreted code.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import deque
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zmq

from bench import wordcount
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.transport import Transport
from tupletree.runtime.inboxes import BatchInbox
from tupletree.topology.batch import Batch
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

KEY = data_key(new_secret())
COUNT_TASK, SPLIT_TASK, ACKER_TASK = 5, 6, 9
SENTENCES, WORD_RUNS, RUN, ACKS = 16, 32, 5, 48


def frame_items() -> tuple[list[Any], list[Any], list[Any]]:
    """One frame's words (to a count task), sentences (to a split task) and acker
    messages, with random 64-bit ids as the collectors draw them."""
    rng = random.Random(7)
    ids = lambda: rng.getrandbits(64) or 1  # noqa: E731
    split = TupleSource("split", "default", 3, Fields(["word"]))
    spout = TupleSource("sentences", "default", 1, Fields(["sentence"]))
    texts = wordcount.sentences()
    words: list[Any] = []
    for r in range(WORD_RUNS):
        root = ids()
        chosen = texts[r % len(texts)].split()[:RUN]
        words.extend(Tuple([w], split, root, ids()) for w in chosen)
    sentences = [Tuple([texts[i % len(texts)]], spout, ids(), ids()) for i in range(SENTENCES)]
    acks = [(1, ids(), ids(), 0) for _ in range(ACKS)]
    return words, sentences, acks


KINDS = ("words", "sentences", "acks", "one")


def only(kind: str | None, words: list[Any], sentences: list[Any], acks: list[Any]) -> tuple:
    """The frame's items cut down to one KIND (None: all of them)."""
    if kind is None:
        return words, sentences, acks
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return (
        words if kind == "words" else [],
        sentences if kind == "sentences" else [],
        acks if kind == "acks" else acks[:1] if kind == "one" else [],
    )


def as_batches(words: list[Any], sentences: list[Any]) -> tuple[list[Any], list[Any]]:
    """The same rows as a BatchBolt's emits to BatchBolts: a Batch per tree's run of
    words, whose first row carries the run's one edge and the others 0
    (runtime/batch_collector.py), and one Batch of the sentences (each its own tree)."""
    runs = []
    for i in range(0, len(words), RUN):
        run = Batch.of_tuples(words[i : i + RUN])
        run._edges[1:] = [0] * (len(run._edges) - 1)
        runs.append(run)
    return runs, [Batch.of_tuples(sentences)] if sentences else []


def measure(
    frames: int = 500,
    same_host_ipc: bool | None = None,
    batch: bool = False,
    kind: str | None = None,
) -> dict[str, float]:
    """``{"send_us", "receive_us", "cpu_us", "items_per_frame"}``: wall-clock microseconds
    per item on each side (the receive side's include waiting for ZeroMQ's I/O thread),
    and the process's CPU microseconds per item (both sides and the I/O thread: what a
    crossing takes from the cores), over ``frames`` frames."""
    ctx = zmq.Context.instance()
    # Over TCP loopback with ``same_host_ipc`` False (or SAME_HOST_IPC=0), as workers of
    # different hosts send (less the network), and as all did before 2026-11-27; by
    # default the two, on one host, use the Unix socket.
    ipc = same_host_ipc
    if ipc is None:
        ipc = os.environ.get("SAME_HOST_IPC", "1") != "0"
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, same_host_ipc=ipc)
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None, same_host_ipc=ipc)
    a.set_peer(1, b.address)
    words, sentences, acks = only(kind, *frame_items())
    per_frame = len(words) + len(sentences) + len(acks)
    inboxes: dict[int, deque] = {COUNT_TASK: deque(), SPLIT_TASK: deque(), ACKER_TASK: deque()}
    if batch:
        words, sentences = as_batches(words, sentences)
        inboxes[COUNT_TASK] = BatchInbox()
        inboxes[SPLIT_TASK] = BatchInbox()
    to_count = a.remote_inbox(COUNT_TASK, 1)
    to_split = a.remote_inbox(SPLIT_TASK, 1)
    to_acker = a.remote_inbox(ACKER_TASK, 1)
    time.sleep(0.2)
    send = receive = 0.0
    cpu0 = time.process_time()
    for _ in range(frames):
        t0 = time.perf_counter()
        to_count.extend(words)
        to_split.extend(sentences)
        to_acker.extend(acks)
        a.flush()
        t1 = time.perf_counter()
        got = 0
        while got < per_frame:
            if a.blocked():  # the connection was not up yet: send what waits
                a.flush()
            moved = b.receive(inboxes, 10)
            if not moved:  # wait for ZeroMQ's I/O thread instead of spinning, so that
                b.socket.poll(100)  # instruction counts hold the path, not the wait
            got += moved
        for inbox in inboxes.values():
            inbox.clear()
        receive += time.perf_counter() - t1
        send += t1 - t0
    n = frames * per_frame
    cpu = time.process_time() - cpu0
    a.close()
    b.close()
    return {
        "send_us": send / n * 1e6,
        "receive_us": receive / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "items_per_frame": per_frame,
    }


def main(frames: int = 500, batch: bool = False, kind: str | None = None) -> None:
    r = measure(frames, batch=batch, kind=kind)
    print(
        f"crossing: send {r['send_us']:.2f} us/item, receive {r['receive_us']:.2f} us/item "
        f"(wall clock); {r['cpu_us']:.2f} us CPU per item ({r['items_per_frame']:.0f} items "
        "per frame)"
    )


if __name__ == "__main__":
    args = sys.argv[2:]
    kinds = [a for a in args if a in KINDS]
    unknown = [a for a in args if a != "batch" and a not in KINDS]
    if unknown or len(kinds) > 1:
        sys.exit(f"usage: crossing.py [frames] [batch] [{'|'.join(KINDS)}]; got {args}")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500, "batch" in args, *kinds)
