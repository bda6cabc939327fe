"""Topology configuration: Storm's key names, their defaults, and their validation.

A config is a plain dict, as in Storm. Unknown keys are kept and handed to components
unchanged; a *known* key with a value of the wrong type or range is rejected at submit
with an error naming the key, because a typo'd timeout silently ignored is a data-loss
bug waiting to happen.
"""

from __future__ import annotations

import difflib
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tupletree.errors import InvalidConfigError


class Config:
    """Storm's configuration keys as constants (``Config.TOPOLOGY_WORKERS`` ...)."""

    TOPOLOGY_WORKERS = "topology.workers"
    TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
    TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
    TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
    TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
    TOPOLOGY_DEBUG = "topology.debug"
    # Not in Storm's public Config, but settled in DESIGN.md.
    TOPOLOGY_ACKER_HIGH_WATER = "topology.acker.high.water"
    # How many queued tuples a task may hold before the spouts feeding the worker are
    # paused (in-worker backpressure; Storm's executor receive buffer size).
    TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE = "topology.executor.receive.buffer.size"
    # How many tuples a bolt task executes per scheduler turn (batched executor turns).
    TOPOLOGY_EXECUTOR_BATCH_SIZE = "topology.executor.batch.size"
    # Storm 2's load-aware shuffle (runtime/routing.py, LoadAwareShuffleRouter): targets
    # in the emitting worker while their load stays under the higher bound, every target
    # until it falls under the lower bound. Off by default here, unlike Storm 2: see there.
    TOPOLOGY_DISABLE_LOADAWARE_MESSAGING = "topology.disable.loadaware.messaging"
    TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND = "topology.localityaware.higher.bound"
    TOPOLOGY_LOCALITYAWARE_LOWER_BOUND = "topology.localityaware.lower.bound"
    DRPC_REQUEST_TIMEOUT_SECS = "drpc.request.timeout.secs"
    # Not Storm's: the period of a component's system ticks (stream "__system_tick"),
    # which the DRPC builder sets on the bolts it wraps to drive their expiry, leaving
    # topology.tick.tuple.freq.secs (at either level) to the user's bolt.
    TOPOLOGY_SYSTEM_TICK_FREQ_SECS = "tupletree.system.tick.freq.secs"
    # Storm's: a worker whose loop reports nothing for this long is hung, and is killed
    # and restarted (SparkCluster; LocalCluster's one worker is the caller's process).
    SUPERVISOR_WORKER_TIMEOUT_SECS = "supervisor.worker.timeout.secs"
    # DRPC (services): the token a DRPC server requires on its spout-side endpoints
    # (fetch, result, fail). A cluster's own server sets it in the topologies it gets;
    # set it by hand for a standalone server started with one (docs/security.md).
    DRPC_INVOCATIONS_TOKEN = "drpc.invocations.token"
    # Kill, Ctrl-C and SIGTERM (runtime hardening). Storm's: how long a kill waits for
    # a worker to stop (between two tuples, then close() and cleanup()) before it gives
    # up on it, naming the task that would not stop (LocalCluster's kill_topology).
    SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS = "supervisor.worker.shutdown.sleep.secs"
    # Trident (tupletree.trident). Storm's: the master batch coordinator starts at most one
    # batch per interval; a plain Spout under Trident gives at most this many tuples per
    # batch (RichSpoutBatchExecutor). Not Storm's: where the coordinator keeps its txids
    # and the spouts their batch metadata (Storm: ZooKeeper), a tupletree.store backend.
    TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS = "topology.trident.batch.emit.interval.millis"
    TOPOLOGY_SPOUT_MAX_BATCH_SIZE = "topology.spout.max.batch.size"
    TOPOLOGY_TRIDENT_PROGRESS_STORE = "topology.trident.progress.store"
    TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG = "topology.trident.progress.store.config"
    # Windowed bolts (tupletree.windowing), not Storm's: the most events one windowed
    # bolt task holds (its window's tuples, or its open sessions'); input beyond it is
    # failed at once, so its spout replays it (windowing/executor.py).
    TOPOLOGY_WINDOW_MAX_EVENTS = "tupletree.window.max.events"
    # Not Storm's: workers of one host (same address) send each other frames over a Unix
    # socket instead of TCP loopback (distributed/transport.py; Linux). False: TCP only.
    TUPLETREE_WORKER_SAME_HOST_IPC = "tupletree.worker.same.host.ipc"
    # Storm 2's transfer batching, for what crosses workers (SparkCluster; Transport.
    # flush_due): what waits for a peer goes as one frame once this many items wait, or
    # once this many milliseconds passed since the last flush while the worker is busy
    # (an idle worker flushes at once). Storm's defaults are 1 and 1 ms; here 512 and
    # 2 ms, measured best for the word count at a tree a sentence. A longer wait makes
    # bigger frames (fewer per-frame costs) and adds up to that much latency a hop under
    # load: notes/performance.md, "A spout's batch routed whole". The names are those
    # Storm's Config reads; its Performance page calls the second one
    # "topology.flush.tuple.freq.millis", a key its Config does not define (not read here).
    TOPOLOGY_TRANSFER_BATCH_SIZE = "topology.transfer.batch.size"
    TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS = "topology.batch.flush.interval.millis"

    # Stateful bolts (tupletree.state): Storm's checkpoint keys, and the aligned mode
    # (beyond Storm: docs/state.md).
    TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
    TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL = "topology.state.checkpoint.interval.ms"
    TOPOLOGY_STATE_CHECKPOINT_MODE = "topology.state.checkpoint.mode"
    # Not Storm's, and set by the cluster at submit, not by the user: where the topology
    # runs ("local" for LocalCluster, else the Spark master), so that a component can
    # refuse at submit a store its workers could not share (store/hosts.py).
    TUPLETREE_CLUSTER_MASTER = "tupletree.cluster.master"


# Every numeric key has a finite range: NaN compares false with everything, so a NaN
# timeout would never expire, and an absurd size (topology.workers = 10**7) would
# allocate gigabytes before anything could refuse it. The upper bounds are far beyond
# any real use; they exist to refuse typos and hostile values, naming the key.


def _int(minimum: int, maximum: int, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            kind = "an integer or None" if optional else "an integer"
            return f"must be {kind}, got {type(value).__name__} {value!r}"
        if not minimum <= value <= maximum:
            return f"must be from {minimum} to {maximum}, got {value}"
        return None

    return check


def _number(
    *, positive: bool, maximum: float, optional: bool = False
) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            kind = "a number or None" if optional else "a number"
            return f"must be {kind}, got {type(value).__name__} {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if positive and value <= 0:
            return f"must be > 0, got {value}"
        if value > maximum:
            return f"must be at most {maximum:g}, got {value:g}"
        return None

    return check


def _fraction(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number from 0 to 1, got {type(value).__name__} {value!r}"
    if not 0 <= value <= 1:  # NaN too: it is not within anything
        return f"must be from 0 to 1, got {value}"
    return None


def _token(value: Any) -> str | None:
    from tupletree.http_guard import check_token

    try:
        check_token("the token", value)
    except ValueError as exc:
        return str(exc).removeprefix("the token ")
    return None


def _choice(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value not in choices:
            return f"must be one of {list(choices)}, got {value!r}"
        return None

    return check


def _mapping(value: Any) -> str | None:
    if value is not None and not isinstance(value, Mapping):
        return f"must be a dict (or None), got {type(value).__name__} {value!r}"
    return None


def _bool(value: Any) -> str | None:
    if not isinstance(value, bool):
        return f"must be True or False, got {type(value).__name__} {value!r}"
    return None


# Trident's progress store: the kinds tupletree.store opens (None: a memory store of
# the built topology's own, see trident/progress.py). Named here, not imported: config
# sits below the store.
_STORE_KINDS = ("memory", "sqlite", "redis", "postgresql")


def _store_kind(value: Any) -> str | None:
    if value is None or value in _STORE_KINDS:
        return None
    return f"must be one of {list(_STORE_KINDS)} or None, got {value!r}"


def _store_config(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        return f"must be a dict of str keys or None, got {type(value).__name__} {value!r}"
    return None


def _text_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return None
    return f"must be a non-empty str or None, got {type(value).__name__} {value!r}"


@dataclass(frozen=True)
class Setting:
    """A known key's default and the check its values must pass (a message, or None)."""

    default: Any
    check: Callable[[Any], str | None]


_DAY = 86400.0
_WEEK = 7 * _DAY

# The one table of known keys; tests/test_config.py checks that it and Config name the
# same keys.
SETTINGS: dict[str, Setting] = {
    Config.TOPOLOGY_WORKERS: Setting(1, _int(1, 4096)),
    Config.TOPOLOGY_ACKER_EXECUTORS: Setting(None, _int(0, 4096, optional=True)),
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: Setting(30, _number(positive=True, maximum=_WEEK)),
    Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: Setting(True, _bool),
    Config.TOPOLOGY_MAX_SPOUT_PENDING: Setting(None, _int(1, 10**7, optional=True)),
    Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: Setting(
        None, _number(positive=True, maximum=_DAY, optional=True)
    ),
    Config.TOPOLOGY_DEBUG: Setting(False, _bool),
    Config.TOPOLOGY_ACKER_HIGH_WATER: Setting(2**20, _int(1, 2**26)),
    Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: Setting(16384, _int(1, 2**22)),
    Config.TOPOLOGY_EXECUTOR_BATCH_SIZE: Setting(256, _int(1, 65536)),
    Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: Setting(True, _bool),
    Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND: Setting(0.8, _fraction),
    Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND: Setting(0.2, _fraction),
    Config.DRPC_REQUEST_TIMEOUT_SECS: Setting(600, _number(positive=True, maximum=_DAY)),
    Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS: Setting(
        None, _number(positive=True, maximum=_DAY, optional=True)
    ),
    Config.SUPERVISOR_WORKER_TIMEOUT_SECS: Setting(30, _number(positive=True, maximum=_DAY)),
    # DRPC (services)
    Config.DRPC_INVOCATIONS_TOKEN: Setting(None, _token),
    # Kill, Ctrl-C and SIGTERM (runtime hardening).
    Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS: Setting(
        3, _number(positive=True, maximum=3600.0)
    ),
    # Trident (tupletree.trident)
    Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: Setting(500, _int(0, 3_600_000)),
    Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE: Setting(1000, _int(1, 10**7)),
    Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: Setting(None, _store_kind),
    Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: Setting(None, _store_config),
    # Stateful bolts (tupletree.state). Storm clamps an interval below 100 ms to 100;
    # here it is refused, as every out-of-range value is.
    Config.TOPOLOGY_STATE_PROVIDER: Setting(
        "memory", _choice("memory", "sqlite", "redis", "postgresql")
    ),
    Config.TOPOLOGY_STATE_PROVIDER_CONFIG: Setting(None, _mapping),
    Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: Setting(1000, _int(100, 86_400_000)),
    Config.TOPOLOGY_STATE_CHECKPOINT_MODE: Setting("storm", _choice("storm", "aligned")),
    # Set by the cluster at submit (where the topology runs).
    Config.TUPLETREE_CLUSTER_MASTER: Setting(None, _text_or_none),
    # Windowed bolts (tupletree.windowing).
    Config.TOPOLOGY_WINDOW_MAX_EVENTS: Setting(100_000, _int(1, 100_000_000)),
    Config.TUPLETREE_WORKER_SAME_HOST_IPC: Setting(True, _bool),
    # distributed/transport.py's FRAME_ITEMS and LINGER_SECS (tests/test_config.py
    # checks that they agree).
    Config.TOPOLOGY_TRANSFER_BATCH_SIZE: Setting(512, _int(1, 1 << 20)),
    Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: Setting(2, _number(positive=True, maximum=1000.0)),
}

DEFAULTS: dict[str, Any] = {key: setting.default for key, setting in SETTINGS.items()}


def validate(conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a full config (defaults filled in); raise InvalidConfigError naming a bad key."""
    if conf is None:
        conf = {}
    if not isinstance(conf, Mapping):
        raise InvalidConfigError(
            f"config must be a dict of Storm keys, got {type(conf).__name__}",
            key="<config>",
            value=conf,
        )
    for key in conf:
        if not isinstance(key, str):
            raise InvalidConfigError(
                f"config keys must be strings, got {key!r}", key=repr(key), value=conf[key]
            )
    _warn_misspelled(conf)
    merged = {**DEFAULTS, **conf}
    for key, setting in SETTINGS.items():
        problem = setting.check(merged[key])
        if problem is not None:
            raise InvalidConfigError(f"config key {key!r} {problem}", key=key, value=merged[key])
    lower = merged[Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND]
    higher = merged[Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND]
    if lower > higher:
        key = Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND
        raise InvalidConfigError(
            f"config key {key!r} must not exceed "
            f"{Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND!r}, got {lower} > {higher}",
            key=key,
            value=lower,
        )
    return merged


# Every key tupletree reads: Config's constants and the few read by name.
KNOWN_KEYS = frozenset(
    {value for name, value in vars(Config).items() if name.isupper() and isinstance(value, str)}
    | {"drpc.http.port", "drpc.servers", "topology.max.task.parallelism", "topology.name"}
)


def _warn_misspelled(conf: Mapping[str, Any]) -> None:
    """Warn of an unknown key that is nearly a known one (``topology.max.spout.pendng``):
    it is kept for the components, as Storm does, but nothing in tupletree reads it, so
    the setting the user meant silently keeps its default."""
    for key in conf:
        if key in KNOWN_KEYS or not key.startswith(("topology.", "tupletree.", "drpc.")):
            continue
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.9)
        if close:
            warnings.warn(
                f"config key {key!r} is not one tupletree reads; did you mean {close[0]!r}? "
                "(unknown keys are only passed on to the components)",
                UserWarning,
                stacklevel=_users_stacklevel(),
            )


# This package's directory: the frames of its files are not the user's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _users_stacklevel() -> int:
    """The ``stacklevel`` for a warning of the function calling this that points at the
    first caller outside tupletree: the user's ``submit_topology`` or ``rebalance``
    call, however many of tupletree's own frames lie between (_checked_submission,
    plan_rebalance, validate). ``warnings.warn``'s ``skip_file_prefixes`` does this
    from Python 3.12 on."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


# Keys a component's override cannot change: the acker tasks and the timeouts of trees
# (which span components) are the topology's. Storm drops them from a component's
# config; tupletree says so, since a user who sets one expects it to hold.
TOPOLOGY_ONLY = frozenset(
    {
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS,
        Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS,
        Config.TOPOLOGY_ACKER_EXECUTORS,
    }
)


def validate_component_conf(component: str, conf: Mapping[str, Any]) -> None:
    """Check per-component overrides (``add_configuration``) with the same rules, and
    refuse the keys only the topology's config sets (``TOPOLOGY_ONLY``)."""
    for key, value in conf.items():
        if key in TOPOLOGY_ONLY:
            raise InvalidConfigError(
                f"component {component!r}: config key {key!r} is the topology's, not a "
                "component's (every tree is timed out and acked by the topology's "
                "setting): set it in the topology's config",
                key=key,
                value=value,
            )
        setting = SETTINGS.get(key)
        problem = setting.check(value) if setting else None
        if problem is not None:
            raise InvalidConfigError(
                f"component {component!r}: config key {key!r} {problem}", key=key, value=value
            )
