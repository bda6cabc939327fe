"""The control protocol between the driver and its workers: every message, its payload,
and the signed frame that carries it.

Every message is a frozen dataclass below; nothing else crosses the control channel,
and ``decode_envelope``/``decode_command`` refuse any other type. Workers send
``FromWorker`` messages, each wrapped in an ``Envelope`` that names the worker and its
attempt (so the driver can drop what an attempt that has since been replaced still
says); the driver sends ``ToWorker`` messages (the socket already says which
worker).

A frame is ``[mac, payload]``: the payload is a pickle, the mac its HMAC-SHA256 keyed
with the topology's secret, checked *before* anything is unpickled, so a stranger who
reaches the control port cannot make the driver (or a worker) unpickle anything. The
secret reaches workers inside their Spark task (the closure), never over the network
the workers listen on. ``data_key`` derives the data plane's key from the same secret.

A signed frame can still be replayed by whoever saw it: the driver takes each message a
task sends on a socket of its own (``TaskStarted``, a fatal ``ErrorReport``,
``Exiting``) once per attempt, and everything else only from the route the worker's
own registration bound (``distributed/driver_state.py``).

Adding a message: a dataclass here, in the ``FromWorker`` or ``ToWorker`` union; then
its one ``case`` in ``DriverState.on`` (``distributed/driver_state.py``) or its branch
in the worker's loop (``distributed/worker_main.py``).
"""

from __future__ import annotations

import hmac
import pickle
import secrets
from dataclasses import dataclass, field
from typing import Any, get_args

MAC_BYTES = 32  # HMAC-SHA256

# ------------------------------------------------------------------ worker -> driver


@dataclass(frozen=True)
class TaskStarted:
    """The Spark task got a slot (sent before ``worker_main`` runs)."""

    pid: int
    host: str
    task_attempt_id: int | None


@dataclass(frozen=True)
class Register:
    """A worker's hello: where its data socket listens, and who it is."""

    pid: int
    host: str
    address: str


@dataclass(frozen=True)
class Heartbeat:
    """The worker is alive (every ``heartbeat_interval``)."""


@dataclass(frozen=True)
class Ready:
    """The worker opened its tasks and runs its loop."""


@dataclass(frozen=True)
class Metrics:
    """A worker's periodic report: its tasks' metrics, the errors reported since the
    last report, whether its last round was idle, frames per peer address, its
    resident memory (None where it cannot be read), the trees its spouts saw time
    out since the last report (``TimedOutTree.to_dict``; at most ``RECENT_LIMIT``), and
    the frames it refused so far, by kind (``"control"``: failed authentication on its
    control socket; ``"data"``: on its data socket; ``"unreadable"``: signed data
    frames it could not read)."""

    snapshot: dict[int, dict[str, Any]]
    errors: list[str]
    idle: bool
    sent_to: dict[str, int]
    received_from: dict[str, int]
    rss_bytes: int | None = None
    timed_out: list[dict[str, Any]] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorReport:
    """An exception in the worker; ``fatal`` when it ends the worker."""

    error: str
    traceback: str
    fatal: bool = False


@dataclass(frozen=True)
class LogLine:
    """A log record of the worker's (WARNING and up), rate-limited by the worker."""

    level: str
    line: str


@dataclass(frozen=True)
class Exiting:
    """``worker_main`` returned; the task is about to end."""


FromWorker = TaskStarted | Register | Heartbeat | Ready | Metrics | ErrorReport | LogLine | Exiting
FROM_WORKER: tuple[type, ...] = get_args(FromWorker)


@dataclass(frozen=True)
class Envelope:
    """What a worker's frame holds: who sends ``message``, and whether it wants an
    ``Ack`` (``send_once``, whose process may exit right after)."""

    worker: int
    attempt: int
    message: FromWorker
    want_ack: bool = False


# ------------------------------------------------------------------ driver -> worker


@dataclass(frozen=True)
class Welcome:
    """The answer to ``Register``: the worker count and the peers known so far."""

    num_workers: int
    peers: dict[int, str]
    attempt: int


@dataclass(frozen=True)
class Peers:
    """The full peer table; ``changed`` lists the workers whose address changed."""

    peers: dict[int, str]
    changed: list[int]


@dataclass(frozen=True)
class Ping:
    """The driver is alive; never shown to the worker's code."""


@dataclass(frozen=True)
class Ack:
    """The answer to an envelope with ``want_ack``. To a ``TaskStarted``, ``delay`` is
    how long the task must wait before it starts its worker (the restart backoff)."""

    delay: float = 0.0


@dataclass(frozen=True)
class Stop:
    """The worker should drain and return from ``worker_main``."""

    reason: str


@dataclass(frozen=True)
class Activate:
    """Start calling the spouts' ``next_tuple``."""


@dataclass(frozen=True)
class Deactivate:
    """Stop calling the spouts' ``next_tuple``."""


ToWorker = Welcome | Peers | Ping | Ack | Stop | Activate | Deactivate
TO_WORKER: tuple[type, ...] = get_args(ToWorker)


# ------------------------------------------------------------------ frames


def new_secret() -> bytes:
    """A fresh random key for one topology (one launcher and its workers)."""
    return secrets.token_bytes(32)


def data_key(secret: bytes) -> bytes:
    """The key of the data plane's frames, derived from the topology's secret (a key
    per purpose: a control frame can never pass for a data frame, nor the reverse)."""
    return hmac.digest(secret, b"tupletree data frames", "sha256")


class BadFrame(ValueError):
    """A frame that is malformed, not signed with our secret, or not a message of this
    protocol; it is dropped."""


def encode(secret: bytes, obj: Envelope | ToWorker) -> list[bytes]:
    """Pickle ``obj`` and sign it: the two frames to send."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return [hmac.digest(secret, payload, "sha256"), payload]


def _verified(secret: bytes, frames: list[bytes]) -> Any:
    if len(frames) != 2:
        raise BadFrame(f"expected 2 frames (hmac, payload), got {len(frames)}")
    mac, payload = frames
    if not hmac.compare_digest(mac, hmac.digest(secret, payload, "sha256")):
        raise BadFrame("bad signature (not from this topology's driver or workers)")
    try:
        return pickle.loads(payload)
    except Exception as exc:  # a signed frame we cannot read: a version mismatch
        raise BadFrame(f"cannot unpickle payload: {exc}") from exc


def decode_envelope(secret: bytes, frames: list[bytes]) -> Envelope:
    """A worker's frame, checked (signature first, then its types), or BadFrame."""
    obj = _verified(secret, frames)
    if (
        not isinstance(obj, Envelope)
        or not isinstance(obj.message, FROM_WORKER)
        or type(obj.worker) is not int
        or type(obj.attempt) is not int
    ):
        raise BadFrame(f"not a worker's envelope: {type(obj).__name__}")
    return obj


def decode_command(secret: bytes, frames: list[bytes]) -> ToWorker:
    """A driver's frame, checked (signature first, then its type), or BadFrame."""
    obj = _verified(secret, frames)
    if not isinstance(obj, TO_WORKER):
        raise BadFrame(f"not a message to a worker: {type(obj).__name__}")
    return obj
