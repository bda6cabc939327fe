"""Worker bodies the Spark tests run inside Spark tasks, and values they send between
workers (pickled by value)."""

from __future__ import annotations

import time

import zmq

from tupletree.distributed.control import Activate, LogLine, Peers, Stop, Welcome
from tupletree.distributed.control_client import ControlClient, advertise_host


def echo_worker(
    index: int, attempt: int, control_address: str, returns_on_activate: bool = False
) -> None:
    """Register a real data socket, then echo every command back until told to stop,
    and report every peer-table change it sees. Replies are log lines holding
    ``repr((kind, payload, attempt))``: ("peers", (peers, changed), attempt) or
    ("echo", command name, attempt). With ``returns_on_activate``, attempt 0 returns on
    its first ``Activate`` (its code ends while the topology runs)."""
    returns_on_activate = returns_on_activate and attempt == 0
    ctx = zmq.Context.instance()
    data = ctx.socket(zmq.PULL)
    host = advertise_host(control_address)
    port = data.bind_to_random_port(f"tcp://{host}")
    try:
        with ControlClient(control_address, index, attempt, heartbeat_interval=0.5) as control:
            control.register(f"tcp://{host}:{port}")
            while True:
                msg = control.recv(timeout=1.0)
                if msg is None:
                    continue
                if isinstance(msg, Stop) or (returns_on_activate and isinstance(msg, Activate)):
                    return
                if isinstance(msg, (Welcome, Peers)):
                    changed = msg.changed if isinstance(msg, Peers) else None
                    reply = ("peers", (dict(msg.peers), changed), attempt)
                else:
                    reply = ("echo", type(msg).__name__, attempt)
                control.send(LogLine("INFO", repr(reply)))
    finally:
        data.close(linger=0)


def failing_worker(index: int, attempt: int, control_address: str) -> None:
    """Dies at once on every attempt, so Spark gives up on the task."""
    raise RuntimeError(f"boom from worker {index} attempt {attempt}")


def silent_worker(index: int, attempt: int, control_address: str) -> None:
    """Never registers (a worker stuck before it could say hello)."""
    time.sleep(120)


class NotRebuildable(Exception):
    """Pickles (an exception pickles its args) but cannot be unpickled: __init__ takes
    two arguments and args holds one."""

    def __init__(self, record: str, why: str) -> None:
        super().__init__(record)
        self.why = why


def returning_worker(index: int, attempt: int, control_address: str) -> None:
    """An echo worker whose first attempt returns when it is activated."""
    echo_worker(index, attempt, control_address, returns_on_activate=True)
