"""Control frames between the driver's WorkerLauncher and the workers' ControlClient.

A message is a small dict with a ``"type"`` key, pickled and sent as two zmq frames:
``[hmac, payload]``. The HMAC (SHA-256, keyed with a random secret the launcher ships
to its workers inside the Spark task) is checked *before* unpickling, so a stranger
who connects to the control port cannot make the driver unpickle anything; on a real
cluster that port is reachable from the network.

Workers -> driver payloads are ``(worker_index, attempt, message)`` so the driver can
drop messages from an attempt that has since been replaced. Driver -> worker payloads
are the message alone (the socket already identifies the worker).
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
from typing import Any

# Worker -> driver.
TASK_STARTED = "task_started"  # pid, host, task_attempt_id: sent before worker_main runs
REGISTER = "register"  # index, attempt, pid, host, address, task_attempt_id, info
HEARTBEAT = "heartbeat"  # any extra keys are the worker's stats
ERROR = "error"  # error, traceback, fatal
LOG = "log"  # level, line
EXITING = "exiting"  # worker_main returned (or raised); the task is about to end
# Driver -> worker.
WELCOME = "welcome"  # num_workers, peers, assignment: the answer to REGISTER
PEERS = "peers"  # peers (full table), changed (indices whose address changed)
PING = "ping"  # driver is alive; never shown to the worker's code
ACK = "ack"  # answer to a message that carried "want_ack": True (see send_once)
STOP = "stop"  # reason: the worker should shut down and return from worker_main
# Launcher -> its own inbox (not sent over the wire).
WORKER_REGISTERED = "worker_registered"
WORKER_RESTARTING = "worker_restarting"  # reason, lived, delay, restarts, crash_loop
JOB_ENDED = "job_ended"

Message = dict[str, Any]


def new_secret() -> bytes:
    """A fresh random key for one launcher and its workers."""
    return secrets.token_bytes(32)


class BadFrame(ValueError):
    """A frame that is malformed or not signed with our secret; it is dropped unread."""


def encode(secret: bytes, obj: Any) -> list[bytes]:
    """Pickle ``obj`` and sign it: the two frames to send."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return [hmac.new(secret, payload, hashlib.sha256).digest(), payload]


def decode(secret: bytes, frames: list[bytes]) -> Any:
    """Check the signature of ``[hmac, payload]`` and unpickle it, or raise BadFrame."""
    if len(frames) != 2:
        raise BadFrame(f"expected 2 frames (hmac, payload), got {len(frames)}")
    mac, payload = frames
    expected = hmac.new(secret, payload, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected):
        raise BadFrame("bad signature (not from this launcher or its workers)")
    try:
        return pickle.loads(payload)
    except Exception as exc:  # a signed frame we cannot read: a version mismatch
        raise BadFrame(f"cannot unpickle payload: {exc}") from exc
