"""BrokerSpout: what every broker spout shares (DESIGN.md "Connectors").

Contract, for users of a broker spout:

- The broker keeps a message until the spout acknowledges it, and the spout does so
  only when the message's tuple tree completed (``ack``) or when it gave up on it:
  after more than ``retry.max_retries`` failures it writes the message to
  ``dead_letter`` (a destination of the same broker) and then acknowledges it; with no
  dead letter it logs and reports the message, and acknowledges it. A failed message is
  replayed by the spout after ``retry.delay(failures)`` seconds, with the same msg id.
- The spout emits one field, ``message``: the body decoded as UTF-8 text. ``fields``
  and ``decode`` (raw bytes -> list of values) change that; a body ``decode`` rejects is
  reported and dead-lettered at once (replaying it cannot help).
- ``metrics(topology)[component]["custom"]["connector"][task]`` counts, per task:
  received (deliveries emitted the first time), acked, failed, retried, dead_lettered,
  redelivered (deliveries the broker marked as delivered before), stale and
  stale_settles (deliveries whose settle or replay was dropped because the broker had
  already taken the message back: seen by the worker's thread, or by the I/O thread
  after it reconnected), reconnects, plus the gauges held (delivered, not settled) and
  buffered. ``connector_totals`` sums them.
- At submit, ``check_config`` refuses a message timeout the broker's lease would not
  outlive (a tree may stay pending up to twice ``topology.message.timeout.secs``) and,
  unless ``check_at_submit=False``, connects once: an unreachable broker, bad
  credentials or a missing queue/stream/group raise ConnectorError there. While running,
  the same troubles are reported in ``cluster.errors(name)`` and the spout reconnects,
  paced by ``reconnect``.

Contract, for a broker's subclass:

- Threads: ``open`` starts one I/O thread per task, which alone owns the broker client.
  The worker's thread never calls the broker: ``next_tuple`` pops a ``Delivery`` from
  the inbound buffer (at most ``buffer_size`` deliveries: the I/O thread fetches only
  what fits) and ``ack``/``fail``/``reset_timeout`` append ``(action, delivery)`` to the
  outbound queue, which the I/O thread settles at its next turn (woken once per worker
  round that queued any; a turn waits at most ``POLL_SECS`` in ``fetch``). The I/O
  thread wakes the worker when it buffers deliveries. ``close`` stops the thread;
  nothing acknowledged is lost, and whatever was delivered and not acknowledged stays
  with the broker, which delivers it again.
- The subclass implements ``connect(epoch) -> Session`` (called on the I/O thread,
  again after any failure), ``address()`` (for messages, no password), ``leases(conf)``
  (the broker's leases the message timeout must stay under) and sets
  ``settles_survive_reconnect``: whether a settle for a delivery of an earlier session
  still reaches the message (a Redis entry stays pending in its group: yes; a RabbitMQ
  delivery tag dies with its channel, whose messages the broker requeues: no, such
  settles and replays are dropped and counted as ``stale``).
- Max spout pending can hold a fetched delivery in the buffer for as long as a stall
  lasts, while the broker's lease runs from its delivery: the I/O thread sends a TOUCH
  for each delivery that has waited a quarter of the shortest lease (``RENEW_SHARE``,
  counted as ``renewed``), unless ``renews_leases`` is False (RabbitMQ, whose consumer
  timeout only an ack ends).
- A ``Session`` has ``fetch(max_messages, timeout) -> list[Delivery]`` (may block up to
  ``timeout``; a session may have ``interrupt()``, which the worker's thread calls to
  end a waiting ``fetch`` early when settles are queued; and ``keepalive()``, which
  the I/O thread calls each turn that its buffer is full and it fetches nothing, so
  that a client whose heartbeats run only inside its calls (pika's) still sends them
  and a dropped connection is noticed then, not once the buffer drains),
  ``settle(actions)`` (each ``(ACK | RETRY | DEAD | TOUCH, delivery)``: ACK
  acknowledges; RETRY says the spout will replay it after a backoff (keep its lease
  fresh); DEAD writes the body to the dead letter, if any, then acknowledges; TOUCH,
  sent for a bolt's ``reset_timeout`` and when a replay is emitted, renews the lease)
  and ``close()``. A session that raises is closed and replaced; when settles survive
  a reconnect, the actions it was given are settled again by the next session
  (acknowledging twice is harmless), else dropped. On ``close`` the settles still
  queued are sent before the session closes.
- A broker that can delay a redelivery itself sets ``broker_redelivers``: a failed
  message is then not held for a replay; its RETRY settle asks the broker to deliver it
  again after ``retry.delay(d.failures)``, and its session sets ``Delivery.failures``
  from the broker's delivery count (so the count survives a restart of the worker).

Clocks: what the topology decides follows the cluster's clock (``context.now()``,
simulated on ``LocalCluster(simulate_time=True)``, where it moves with
``advance_time``): a failed message's replay backoff here, Kafka's commit and
partition-refresh timers, Redis's claim pass. What paces the broker itself stays on
real time, on the I/O thread: ``fetch``'s poll timeout, socket and client timeouts, the
reconnect backoff after a failed connect (a broker that is down is down in real time),
the renewal of a buffered delivery's lease (the broker's lease runs in real time) and
the error mailbox's report interval (connectors/mailbox.py); the SQLite queue's
leases are wall-clock times stored in its file, shared with other processes.
"""

from __future__ import annotations

import heapq
import logging
import reprlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

from tupletree.config import Config
from tupletree.connectors.base import Connector
from tupletree.connectors.mailbox import close_quietly
from tupletree.connectors.retry import RetryPolicy
from tupletree.errors import InvalidConfigError
from tupletree.topology.components import OutputFieldsDeclarer, Spout

log = logging.getLogger("tupletree.connectors")

ACK, RETRY, DEAD, TOUCH = "ack", "retry", "dead", "touch"
POLL_SECS = 0.05
FETCH_BATCH = 500
DEFAULT_BUFFER = 1000
# The most messages one tree may hold (``messages_per_tree``): a tree's rows cross
# workers as one run, which must fit a frame (distributed/transport.py).
MAX_MESSAGES_PER_TREE = 10_000

# Each counter is written by one thread only: the worker's, or the I/O thread's.
SPOUT_COUNTERS = ("received", "acked", "failed", "retried", "dead_lettered", "stale")
IO_COUNTERS = ("redelivered", "reconnects", "stale_settles", "renewed")
# A delivery waiting in the buffer has its lease renewed (TOUCH) once it has waited this
# share of the shortest lease the spout declares (``leases``).
RENEW_SHARE = 0.25


class Delivery:
    """One message as the broker delivered it: ``key`` (the msg id: what the broker
    needs to settle it, hashable), ``body`` (bytes), ``epoch`` (the session that
    delivered it), ``redelivered`` (the broker says it delivered it before) and
    ``handle`` (anything else the broker's session needs)."""

    __slots__ = ("body", "epoch", "failures", "handle", "key", "redelivered", "renewed_at")

    def __init__(
        self, key: Any, body: bytes, epoch: int, redelivered: bool = False, handle: Any = None
    ) -> None:
        self.key = key
        self.body = body
        self.epoch = epoch
        self.redelivered = redelivered
        self.handle = handle
        self.failures = 0
        self.renewed_at = 0.0  # the I/O thread's: when it buffered it, or last renewed it

    def __repr__(self) -> str:
        return f"Delivery({self.key!r}, failures={self.failures})"


class Session(Protocol):
    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]: ...

    def settle(self, actions: list[tuple[str, Delivery]]) -> None: ...

    def close(self) -> None: ...


def check_lease(
    connector: str, conf: dict[str, Any], key: str, lease_secs: float | None, what: str
) -> None:
    """Raise InvalidConfigError unless every tree times out before ``lease_secs``: a
    tree stays pending up to twice the message timeout (two rotating buckets)."""
    if lease_secs is None:
        return
    timeout_key = Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS
    timeout = conf[timeout_key]
    if not conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]:
        raise InvalidConfigError(
            f"{connector}: message timeouts are off ({Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS!r}"
            f" is False), so a stalled tree would outlive {what} ({key}={lease_secs} s) and "
            "the broker would deliver its message again while it is in flight; turn "
            f"timeouts on, or raise {key}",
            key=Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS,
            value=False,
        )
    if 2 * timeout >= lease_secs:
        # Only fixes that can be made: a lease of 0 s or less leaves no message timeout
        # that would do, so the hint then asks for a longer lease alone.
        fixes = [f"raise {key} by more than {2 * timeout - lease_secs:g} s"]
        if lease_secs > 0:
            fixes.insert(0, f"lower {timeout_key!r} below {lease_secs / 2:g} s")
        raise InvalidConfigError(
            f"{connector}: {what} ({key}={lease_secs:g} s) must exceed twice "
            f"{timeout_key!r} ({timeout:g} s): a tree times out between one and two message "
            f"timeouts, and the broker would deliver a message again while its tree is "
            f"still pending; {' or '.join(fixes)}",
            key=timeout_key,
            value=timeout,
        )


def check_messages_per_tree(messages_per_tree: Any) -> None:
    """Raise ValueError, naming the keyword, unless it is an int from 1 to
    MAX_MESSAGES_PER_TREE (a broker spout's and the SQLite queue's spout's)."""
    most = MAX_MESSAGES_PER_TREE
    if type(messages_per_tree) is not int or not 1 <= messages_per_tree <= most:
        raise ValueError(
            f"messages_per_tree must be an integer from 1 to {most:,}, got {messages_per_tree!r}"
        )


class BrokerSpout(Connector, Spout):
    """Base of the broker spouts; see the module docstring for the contract."""

    settles_survive_reconnect = True
    # True: a TOUCH renews the broker's leases (``leases``), so a delivery that waits in
    # the buffer is touched as it ages there. False: no settle but the ack ends a lease
    # (RabbitMQ's consumer timeout).
    renews_leases = True
    # False: the spout replays a failed message itself after its backoff. True: the
    # broker does (JetStream's nak with a delay); the session's RETRY settle asks it to
    # after ``retry.delay(d.failures)``, and sets ``failures`` of what it fetches from
    # the broker's own delivery count.
    broker_redelivers = False
    # False: emit untracked (no msg id, no ack or fail comes back, nothing is held),
    # for a spout whose processing guarantee does not need the tree (Kafka's
    # at-most-once and none).
    tracked = True

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        dead_letter: str | None = None,
        fields: list[str] | None = None,
        decode: Callable[[bytes], list[Any]] | None = None,
        buffer_size: int | None = None,
        reconnect: RetryPolicy | None = None,
        check_at_submit: bool = True,
        messages_per_tree: int = 1,
    ) -> None:
        self.retry = retry if retry is not None else RetryPolicy()
        if not isinstance(self.retry, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, got {self.retry!r}")
        self.dead_letter = dead_letter
        self.fields = list(fields) if fields is not None else ["message"]
        self.decode = decode
        if buffer_size is not None and (not isinstance(buffer_size, int) or buffer_size < 1):
            raise ValueError(f"buffer_size must be a positive integer, got {buffer_size!r}")
        self.buffer_size = buffer_size
        check_messages_per_tree(messages_per_tree)
        if messages_per_tree > 1 and self.retry.max_retries == 0:
            raise ValueError(
                f"messages_per_tree={messages_per_tree} needs retry.max_retries of at least "
                "1: a tree fails whole, so each message sharing a tree with a bad one fails "
                "once with it and would be dead-lettered at once"
            )
        self.messages_per_tree = messages_per_tree
        self._init_connector(reconnect, check_at_submit)

    # -- what a broker provides -------------------------------------------------------

    def connect(self, epoch: int) -> Session:
        raise NotImplementedError

    def leases(self, conf: dict[str, Any]) -> list[tuple[str, float | None, str]]:
        """``(keyword, seconds or None, what it is)`` for each lease of the broker's
        that the message timeout must stay under."""
        return []

    def probe(self) -> None:
        """Connect once and check what the spout needs; raise ConnectorError."""
        self.connect(0).close()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    # -- submit -----------------------------------------------------------------------

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        """Called at submit with the component's full config; raises InvalidConfigError
        or ConnectorError naming the component."""
        self.component = component
        for key, lease, what in self.leases(conf):
            check_lease(self.connector_name(), conf, key, lease, what)
        super().check_config(conf, component)

    # -- the worker's side ------------------------------------------------------------

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.component = context.component_id
        self.collector = collector
        if self.buffer_size is None:
            self.buffer_size = self.default_buffer(conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING))
        # The leases run from the broker's delivery, and max spout pending can hold a
        # delivery in the buffer for as long as a stall lasts: renewed, it is not
        # claimed by another consumer (Redis) or redelivered (JetStream's ack wait)
        # while it waits here. None: the broker has no lease to renew.
        leases = [secs for _, secs, _ in self.leases(conf) if secs is not None and secs > 0]
        self._renew_after = None
        if leases and self.renews_leases:
            self._renew_after = RENEW_SHARE * min(leases)
        self._next_renew = 0.0
        self.counts = dict.fromkeys(SPOUT_COUNTERS, 0)
        self._held: dict[Any, Delivery] = {}
        # With messages_per_tree > 1: each tree's msg id (a number of this task's) ->
        # the keys of the deliveries it holds; the tree being gathered by next_tuple.
        self._trees: dict[int, list[Any]] = {}
        self._tree_seq = 0
        self._gathering: list[tuple[list[Any], Delivery]] | None = None
        self._retries: list[tuple[float, int, Any]] = []
        self._seq = 0
        # Shared with the I/O thread. deque append/popleft are atomic: no lock needed.
        self._inbound: deque[Delivery] = deque()
        self._outbound: deque[tuple[str, Delivery]] = deque()
        self.io_counts = dict.fromkeys(IO_COUNTERS, 0)
        self.epoch = 0
        self._session: Session | None = None  # the I/O thread's, for ``interrupt``
        self._fetching = False
        self._start_io(context, self._io_loop, self._round)

    def default_buffer(self, max_pending: int | None) -> int:
        """The deliveries the spout buffers when ``buffer_size`` is not given: max
        spout pending (DEFAULT_BUFFER without one). Max spout pending counts trees, so
        with several messages a tree: room for as many messages as may be in flight
        (up to DEFAULT_BUFFER), and for two trees at least. Sized by trees alone, a
        Redis spout with trees of 100 ran 15% slower than with a tree each, waiting on
        fetches (bench/connectors.py)."""
        pending = max_pending or DEFAULT_BUFFER
        per_tree = self.messages_per_tree
        return max(pending, 2 * per_tree, min(pending * per_tree, DEFAULT_BUFFER))

    def _valid(self, d: Delivery) -> bool:
        return self.settles_survive_reconnect or d.epoch == self.epoch

    def next_tuple(self) -> None:
        n = self.messages_per_tree
        if n == 1:
            self._next_message()
            return
        # Up to n messages as one tree, as many as are here now (a tree is not held
        # back to fill up: that would add latency when the broker is slow). Each
        # message is still settled on its own. A message that failed before goes in a
        # tree of its own: a tree fails whole, so a bad message costs the messages it
        # shared a tree with one failure each, never one per replay.
        self._gathering = gathered = []
        alone = False
        try:
            for _ in range(n):
                before = len(gathered)
                if not self._next_message():
                    break
                if len(gathered) > before and _went_before(gathered[-1][1]):
                    alone = True
                    break
        finally:
            self._gathering = None
        if alone and len(gathered) > 1:
            try:
                self._emit_tree(gathered[:-1])
            finally:  # (each tree of its own: one that raised fails alone)
                self._emit_tree(gathered[-1:])
        else:
            self._emit_tree(gathered)

    def _emit_tree(self, gathered: list[tuple[list[Any], Delivery]]) -> None:
        if not gathered:
            return
        msg_id = None
        if self.tracked:
            self._tree_seq += 1
            msg_id = self._tree_seq
            self._trees[msg_id] = [d.key for _, d in gathered]
        try:
            self.collector.emit_batch([values for values, _ in gathered], msg_id=msg_id)
        except BaseException:
            # Nothing of the tree went out: its messages fail as one (and are replayed).
            if msg_id is not None:
                self.fail(msg_id)
            raise

    def _next_message(self) -> bool:
        """Emit (or gather) the next message: a replay that is due, else the next one
        fetched. False when there was nothing to take."""
        retries = self._retries
        if retries and retries[0][0] <= self.context.now():
            key = heapq.heappop(retries)[2]
            d = self._held.get(key)
            if d is not None:
                if self._valid(d):
                    self._send(TOUCH, d)  # its lease runs from the replay on
                    self._emit(d)
                else:  # the broker took it back with its channel: it comes again
                    del self._held[key]
                    self.counts["stale"] += 1
            return True
        try:
            d = self._inbound.popleft()
        except IndexError:
            return False
        if not self._valid(d):
            self.counts["stale"] += 1
            return True
        held = self._held.get(d.key)
        if held is not None and self._valid(held):
            return True  # the broker gave us again what we hold (a claim of our own entry)
        # A held one that is no longer valid was taken back by a reconnect whose broker
        # keys deliveries without an epoch (Kafka's (partition, offset)): this one
        # replaces it, or the new session would wait for its settle for good. Should
        # the old tree still settle, it settles this one (the message went through it).
        if not (self.broker_redelivers and d.redelivered):
            # (A broker's own replay of a failed message is counted as redelivered.)
            self.counts["received"] += 1
        if self.tracked:
            self._held[d.key] = d
        self._emit(d)
        return True

    def _emit(self, d: Delivery) -> None:
        try:
            if d.body is None:
                raise ValueError("the message has no body")
            values = self.decode(d.body) if self.decode is not None else [d.body.decode()]
            if (
                isinstance(values, str | bytes | Mapping | AbstractSet)
                or not hasattr(values, "__len__")
                or len(values) != len(self.fields)
            ):
                # Caught here, not by the emit: in a tree of several messages one bad
                # row would fail its neighbours with it, again at every replay.
                raise ValueError(
                    f"decode gave {reprlib.repr(values)}, not a list of {len(self.fields)} "
                    f"value(s) for the fields {self.fields}"
                )
        except Exception as exc:
            self.collector.report_error(
                ValueError(
                    f"{self.connector_name()}: message {d.key!r} cannot be decoded "
                    f"({type(exc).__name__}: {exc}); dead-lettered without retries"
                )
            )
            self._give_up(d)
            return
        gathering = self._gathering
        if gathering is not None:
            gathering.append((values, d))
            return
        try:
            self.collector.emit(values, msg_id=d.key if self.tracked else None)
        except BaseException:
            # Nothing of it went out (a user's grouping raised, say): it fails, and is
            # replayed or dead-lettered by its count, as a tree of several does
            # (_emit_tree). Held, it waited for a settle that never came.
            if self.tracked:
                self._fail_message(d.key)
            raise

    def _keys(self, msg_id: Any, done: bool) -> Any:
        """The keys of the messages a msg id stands for: a tree's (``done``: the tree
        is over, forget it), or the message's own."""
        if self.messages_per_tree == 1:
            return (msg_id,)
        return self._trees.pop(msg_id, ()) if done else self._trees.get(msg_id, ())

    def ack(self, msg_id: Any) -> None:
        for key in self._keys(msg_id, done=True):
            self._ack_message(key)

    def _ack_message(self, msg_id: Any) -> None:
        d = self._held.pop(msg_id, None)
        if d is None:
            return
        if not self._valid(d):
            self.counts["stale"] += 1
            return
        self.counts["acked"] += 1
        self._send(ACK, d)

    def fail(self, msg_id: Any) -> None:
        # A tree of several messages fails whole: each message counts a failure and is
        # replayed (in a tree of its own) or dead-lettered by its own count.
        for key in self._keys(msg_id, done=True):
            self._fail_message(key)

    def _fail_message(self, msg_id: Any) -> None:
        d = self._held.get(msg_id)
        if d is None:
            return
        self.counts["failed"] += 1
        d.failures += 1
        if not self._valid(d):
            del self._held[msg_id]
            self.counts["stale"] += 1
        elif self.retry.exhausted(d.failures):
            self._give_up(d)
        else:
            self.counts["retried"] += 1
            if self.broker_redelivers:
                # The broker delivers it again once the backoff passed (the session
                # asks it to with the RETRY settle): nothing to hold until then.
                del self._held[msg_id]
            else:
                self._seq += 1
                due = self.context.now() + self.retry.delay(d.failures)
                heapq.heappush(self._retries, (due, self._seq, msg_id))
            self._send(RETRY, d)

    def _give_up(self, d: Delivery) -> None:
        self._held.pop(d.key, None)
        self.counts["dead_lettered"] += 1
        if self.dead_letter is None:
            log.error(
                "%s: message %r failed %d times; acknowledged without a dead letter",
                self.connector_name(),
                d.key,
                d.failures,
            )
        self._send(DEAD, d)

    def reset_timeout(self, msg_id: Any) -> None:
        """A bolt reset the timeout of this message's tree: renew its lease (each of
        the tree's messages' leases)."""
        for key in self._keys(msg_id, done=False):
            d = self._held.get(key)
            if d is not None and self._valid(d):
                self._send(TOUCH, d)

    def _send(self, action: str, d: Delivery) -> None:
        self._outbound.append((action, d))

    def _round(self) -> bool:
        """Once per worker round: hand the I/O thread the settles queued in this round
        at once (one wake-up per round, not per message, so they go out in batches),
        interrupting a ``fetch`` that waits if the session can; report its errors."""
        if self._outbound:
            self._kick.set()
            session = self._session
            if self._fetching and session is not None:
                interrupt = getattr(session, "interrupt", None)
                if interrupt is not None:
                    interrupt()
        if self._errors:
            self._errors.deliver(self.collector)
        return False

    def close(self) -> None:
        self._stop_io()

    def connector_metrics(self) -> dict[str, int]:
        return {
            **self.counts,
            **self.io_counts,
            "held": len(self._held),
            "buffered": len(self._inbound),
            "trees": len(self._trees),
        }

    # -- the I/O thread ---------------------------------------------------------------

    def _io_loop(self) -> None:
        session: Session | None = None
        failures = 0
        while not self._stopping.is_set():
            try:
                session = self._io_turn(session)
            except Exception as exc:
                # (Kafka's checkpoint commit, refused): raised out of this loop, it
                # ended the thread, and the spout fetched nothing more, for good.
                self._errors.post(exc)
                self._session = None
                if session is not None:
                    close_quietly(session)
                session = None
                failures += 1
                self._stopping.wait(self.reconnect.delay(failures - 1))
                continue
            if session is None:
                try:
                    session = self.connect(self.epoch + 1)
                except Exception as exc:
                    failures += 1
                    self._errors.post(exc)
                    self._stopping.wait(self.reconnect.delay(failures))
                    continue
                reconnect = self.epoch > 0
                if reconnect:
                    self.io_counts["reconnects"] += 1
                self.epoch += 1
                self._session = session
                self._session_started(session, reconnect)
            self._renew_waiting()
            actions: list[tuple[str, Delivery]] = []
            try:
                actions = self._take_settles()
                if actions:
                    session.settle(actions)
                    actions = []
                room = self.buffer_size - len(self._inbound)  # type: ignore[operator]
                if room > 0:
                    self._fetching = True
                    try:
                        got = session.fetch(min(room, FETCH_BATCH), POLL_SECS)
                    finally:
                        self._fetching = False
                    if got:
                        self._buffer(got)
                else:
                    # Max spout pending holds the buffer full: nothing to fetch, but the
                    # connection must not go silent (RabbitMQ closes one that misses its
                    # heartbeats and requeues every message it held).
                    keepalive = getattr(session, "keepalive", None)
                    if keepalive is not None:
                        keepalive()
                    self._kick.wait(POLL_SECS)
                    self._kick.clear()
                failures = 0  # a turn the broker answered: the next failure reconnects at once
            except Exception as exc:
                if actions and self.settles_survive_reconnect:
                    self._outbound.extendleft(reversed(actions))
                elif actions:  # their deliveries die with this session: never resent
                    self.io_counts["stale_settles"] += len(actions)
                self._errors.post(exc)
                self._session = None
                close_quietly(session)
                session = None
                # A broker that takes the connection and refuses the work (a Redis
                # demoted to a read-only replica): the sessions that fail one after
                # another, with no turn answered between them, back off as failed
                # connects do (the first after an answered turn reconnects at once).
                failures += 1
                self._stopping.wait(self.reconnect.delay(failures - 1))
        self._session = None
        if session is not None:
            self._settle_last(session)
            close_quietly(session)

    def _io_turn(self, session: Session | None) -> Session | None:
        """A subclass's work at the top of each I/O turn; the session to go on with
        (None: close it, start another). Kafka's rewinds happen here."""
        return session

    def _session_started(self, session: Session, reconnect: bool) -> None:
        """A new session is up (``reconnect``: it replaces one)."""

    def _settle_last(self, session: Session) -> None:
        """On close: send the settles still queued (the trees that completed last)."""
        actions = self._take_settles()
        try:
            if actions:
                session.settle(actions)
        except Exception as exc:  # they stay with the broker, which delivers them again
            log.warning("%s: settling on close failed: %s", self.connector_name(), exc)

    def _take_settles(self) -> list[tuple[str, Delivery]]:
        """The settles queued so far, less those a reconnect made stale."""
        out = self._outbound
        actions = []
        while out:
            actions.append(out.popleft())
        if actions and not self.settles_survive_reconnect:
            actions = self._current(actions)
        return actions

    def _current(self, actions: list[tuple[str, Delivery]]) -> list[tuple[str, Delivery]]:
        """Drop settles for deliveries of an earlier session (judged valid by the
        worker's thread just before the I/O thread reconnected)."""
        epoch = self.epoch
        current = [a for a in actions if a[1].epoch == epoch]
        self.io_counts["stale_settles"] += len(actions) - len(current)
        return current

    def _buffer(self, got: list[Delivery]) -> None:
        now = time.monotonic()
        for d in got:
            d.renewed_at = now
            if d.redelivered:
                self.io_counts["redelivered"] += 1
        self._inbound.extend(got)
        self.context.wakeup()

    def _renew_waiting(self) -> None:
        """Queue a TOUCH for each buffered delivery that has waited ``_renew_after``
        since it was fetched or last renewed (I/O thread; looked at twice a period)."""
        after = self._renew_after
        if after is None:
            return
        now = time.monotonic()
        if now < self._next_renew:
            return
        self._next_renew = now + after / 2
        try:
            waiting = list(self._inbound)
        except RuntimeError:  # the worker's thread took one meanwhile: next time
            return
        for d in waiting:
            if now - d.renewed_at >= after:
                d.renewed_at = now
                self._outbound.append((TOUCH, d))
                self.io_counts["renewed"] += 1


def _went_before(d: Delivery) -> bool:
    """Failed here before, or delivered before by the broker: such a message goes in a
    tree of its own (BrokerSpout.next_tuple)."""
    return bool(d.failures or d.redelivered)


def connector_totals(component_metrics: dict[str, Any]) -> dict[str, int]:
    """Sum a connector's per-task counts: ``connector_totals(metrics[component])``."""
    per_task = component_metrics.get("custom", {}).get("connector", {})
    out: dict[str, int] = {}
    for counts in per_task.values():
        for name, value in (counts or {}).items():
            out[name] = out.get(name, 0) + value
    return out
