"""Per-item cost of the Spark data plane, in one process (two Transports on loopback):
``python bench/transport.py [frames]``. Send side includes Tuple creation, as an emit
does. ``bash bench/instructions_transport.sh`` counts its instructions per item."""

from __future__ import annotations

import os
import sys
import time
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zmq

from tupletree.distributed.control import new_secret
from tupletree.distributed.transport import Transport
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

KEY = new_secret()  # both ends of the data plane share the topology's key


def main(frames: int = 500, per_frame: int = 200) -> None:
    ctx = zmq.Context.instance()
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    a.set_peer(1, b.address)
    src = TupleSource("split", "default", 3, Fields(["word"]))
    inbox = a.remote_inbox(5, 1)
    acker = a.remote_inbox(9, 1)
    inboxes: dict[int, deque] = {5: deque(), 9: deque()}
    words = [f"w{i}" for i in range(50)]
    time.sleep(0.2)
    send = receive = 0.0
    for _ in range(frames):
        t0 = time.perf_counter()
        for i in range(per_frame):
            inbox.append(Tuple([words[i % 50]], src, 1234567890123456789 + i, 98765432109876))
            if i % 10 == 0:
                acker.append((1, 1234567890123456789 + i, 5555555555555, 0))
        a.flush()
        t1 = time.perf_counter()
        expected = per_frame + per_frame // 10
        got = 0
        while got < expected:
            if a.blocked():  # the connection was not up yet: send what waits
                a.flush()
            moved = b.receive(inboxes, 10)
            if not moved:  # wait for ZeroMQ's I/O thread instead of spinning, so that
                b.socket.poll(100)  # instruction counts hold the path, not the wait
            got += moved
        inboxes[5].clear()
        inboxes[9].clear()
        receive += time.perf_counter() - t1
        send += t1 - t0
    n = frames * (per_frame + per_frame // 10)
    print(f"transport: send {send / n * 1e6:.2f} us/item, receive {receive / n * 1e6:.2f} us/item")
    a.close()
    b.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
