"""Redis Streams: RedisStreamSpout reads a stream through a consumer group, RedisStreamSink
appends to one (redis-py).

The spout's contract beyond BrokerSpout's (connectors/spout.py):

- It uses an existing consumer group (``XGROUP CREATE stream group $ MKSTREAM``); a
  missing stream or group is a ConnectorError at submit. Each task is one consumer of
  the group, named ``topology:component:task index``, the same after a restart.
- An entry is acknowledged (``XACK``) when its tree completes; a failed entry stays
  pending in the group and is replayed by the spout after its backoff; a dead-lettered
  one is appended to the ``dead_letter`` stream (fields ``message``, ``source_stream``,
  ``source_id``, ``failures``) and then acknowledged; one the dead letter refuses
  (a key of another type, say) is reported and left pending, to be claimed again.
- Entries pending longer than ``claim_idle_secs`` for any consumer of the group (a dead
  worker's) are claimed (``XAUTOCLAIM``) and emitted again; each connection first
  re-reads the entries pending under the task's own consumer name (a previous life's,
  or those a dropped connection's lost reply delivered). A bolt's
  ``reset_timeout``, a failure and a replay renew the entry's claim (``XCLAIM ...
  JUSTID``, idle time back to 0), so a live spout's entries are not claimed from it:
  ``claim_idle_secs`` must exceed twice the message timeout plus the retry's
  ``max_delay_secs`` (checked at submit).
- Settles survive a reconnect: an entry stays pending in the group whatever happens to
  the connection, so acks that a dropped connection did not deliver are sent again.
"""

from __future__ import annotations

import re
from typing import Any

from tupletree.connectors.errors import redact
from tupletree.connectors.retry import RetryPolicy
from tupletree.connectors.sink import BrokerSink
from tupletree.connectors.spout import ACK, DEAD, RETRY, TOUCH, BrokerSpout, Delivery
from tupletree.extras import missing

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:
    raise missing("redis", "redis", "tupletree.connectors.redis") from exc

DEFAULT_URL = "redis://127.0.0.1:6379/0"
FIELD = b"message"
SOCKET_TIMEOUT_SECS = 10.0


def _client(url: str, connector: Any) -> redis.Redis:
    # No retries inside redis-py: a read whose reply a dropped connection lost must
    # surface, so that the next session re-reads the consumer's pending entries.
    return redis.Redis.from_url(
        url,
        socket_timeout=SOCKET_TIMEOUT_SECS,
        socket_connect_timeout=5.0,
        retry=Retry(NoBackoff(), 0),
        client_name=client_name(connector),
    )


def client_name(connector: Any) -> str:
    """What ``CLIENT LIST`` shows for a connector's connections:
    ``tupletree:<class>:<component>``, without the spaces and quotes Redis refuses in a
    name."""
    component = re.sub(r"[^\w.:-]", "_", str(getattr(connector, "component", "")))
    return f"tupletree:{type(connector).__name__}:{component}"


def _as_sent(response: Any, **options: Any) -> Any:
    return response


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _SpoutSession:
    def __init__(self, spout: RedisStreamSpout, epoch: int) -> None:
        self.spout = spout
        self.epoch = epoch
        self.r = _client(spout.url, spout)
        self.r.set_response_callback("XREADGROUP", _as_sent)  # see ``_read``
        try:
            spout.check_group(self.r)
        except Exception:
            self.r.close()
            raise
        # Each session first re-reads what its consumer name has pending: a previous
        # life's entries, or entries whose XREADGROUP reply a dropped connection lost.
        # Those the spout holds already are skipped by it.
        self.own_cursor: str | None = "0"
        self.claim_cursor = "0-0"
        self.next_claim = 0.0

    def _deliveries(self, entries: list[Any], redelivered: bool) -> list[Delivery]:
        out = []
        for entry_id, fields in entries:
            key = _text(entry_id)
            body = fields.get(FIELD) if fields else None
            out.append(Delivery(key, body, self.epoch, redelivered))  # type: ignore[arg-type]
        return out

    def _read(
        self, cursor: str, count: int, block: int | None, redelivered: bool
    ) -> list[Delivery]:
        """XREADGROUP of this consumer's entries after ``cursor``, as deliveries.

        The reply is unpacked here, in one pass, from what the server sent (the
        session's client has no reply callback for XREADGROUP): redis-py's callback
        would first rebuild it in RESP2's shape, a fifth of the spout's reading time
        with hiredis."""
        s = self.spout
        args: list[Any] = ["XREADGROUP", "GROUP", s.group, s.consumer, "COUNT", count]
        if block is not None:
            args += ["BLOCK", block]
        reply = self.r.execute_command(*args, "STREAMS", s.stream, cursor)
        if not reply:
            return []
        # RESP3 answers {stream: entries}, RESP2 [[stream, entries]]; an entry is
        # [id, [field, value, ...]], with no fields if it was deleted while pending.
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        epoch = self.epoch
        out = []
        for entry_id, flat in entries:
            body = None
            if flat:
                for i in range(0, len(flat), 2):
                    if flat[i] == FIELD:
                        body = flat[i + 1]
                        break
            out.append(Delivery(_text(entry_id), body, epoch, redelivered))  # type: ignore[arg-type]
        return out

    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]:
        s = self.spout
        r = self.r
        if self.own_cursor is not None:
            got = self._read(self.own_cursor, max_messages, None, True)
            if not got:
                self.own_cursor = None
                return []
            self.own_cursor = got[-1].key
            return got
        # The claim pass follows the cluster's clock; the idle time it claims after is
        # Redis's own (real time).
        now = s.context.now()
        if now >= self.next_claim:
            cursor, entries, *_ = r.xautoclaim(
                s.stream,
                s.group,
                s.consumer,
                int(s.claim_idle_secs * 1000),
                start_id=self.claim_cursor,
                count=max_messages,
            )
            self.claim_cursor = _text(cursor)
            if self.claim_cursor == "0-0":  # a full pass: wait before the next
                self.next_claim = now + s.claim_every_secs
            if entries:
                return self._deliveries(entries, True)
        return self._read(">", max_messages, int(timeout * 1000), False)

    def settle(self, actions: list[tuple[str, Delivery]]) -> None:
        s = self.spout
        acks: list[str] = []
        renew: list[str] = []
        dead: list[Delivery] = []
        for action, d in actions:
            if action == ACK:
                acks.append(d.key)
            elif action in (RETRY, TOUCH):
                renew.append(d.key)
            elif action == DEAD:
                dead.append(d)
        if dead and s.dead_letter is not None:
            pipe = self.r.pipeline(transaction=False)
            for d in dead:
                fields = {
                    FIELD: d.body if d.body is not None else b"",
                    "source_stream": s.stream,
                    "source_id": d.key,
                    "failures": d.failures,
                }
                pipe.xadd(s.dead_letter, fields)  # type: ignore[arg-type]
            # A lost connection raises (the settles are sent again by the next session);
            # a write Redis refuses leaves its entry pending, unacknowledged, reported:
            # raised, it would hold back every settle, and every fetch, for good.
            replies = pipe.execute(raise_on_error=False)
            written = []
            for d, reply in zip(dead, replies, strict=True):
                if isinstance(reply, Exception):
                    s._errors.post(
                        s.connector_error(
                            f"entry {d.key} could not be written to the dead letter "
                            f"{s.dead_letter!r}: {reply}; left pending in the group"
                        )
                    )
                else:
                    written.append(d)
            dead = written
        acks.extend(d.key for d in dead)
        pipe = self.r.pipeline(transaction=False)
        if acks:
            pipe.xack(s.stream, s.group, *acks)
        if renew:
            pipe.xclaim(s.stream, s.group, s.consumer, 0, renew, justid=True)
        if acks or renew:
            pipe.execute()

    def close(self) -> None:
        self.r.close()


class RedisStreamSpout(BrokerSpout):
    """Emits ``[message]`` for each entry of ``stream`` read through consumer ``group``."""

    settles_survive_reconnect = True

    def __init__(
        self,
        stream: str,
        group: str,
        url: str = DEFAULT_URL,
        *,
        retry: RetryPolicy | None = None,
        dead_letter: str | None = None,
        claim_idle_secs: float = 120.0,
        **options: Any,
    ) -> None:
        super().__init__(retry=retry, dead_letter=dead_letter, **options)
        if not isinstance(claim_idle_secs, int | float) or claim_idle_secs <= 0:
            raise ValueError(f"claim_idle_secs must be a positive number, got {claim_idle_secs!r}")
        self.stream = stream
        self.group = group
        self.url = url
        self.claim_idle_secs = float(claim_idle_secs)
        # Dead consumers' entries are looked for this often (a full XAUTOCLAIM pass).
        self.claim_every_secs = max(0.5, self.claim_idle_secs / 4)
        self.consumer = ""

    def address(self) -> str:
        return f"{redact(self.url)} stream {self.stream!r} group {self.group!r}"

    def leases(self, conf: dict[str, Any]) -> list[tuple[str, float | None, str]]:
        max_delay = self.retry.max_delay_secs
        return [
            (
                "claim_idle_secs",
                self.claim_idle_secs - max_delay,
                f"the claim idle time less the retry's max_delay_secs ({self.claim_idle_secs}"
                f" - {max_delay} s)",
            )
        ]

    def check_group(self, r: redis.Redis) -> None:
        try:
            groups = r.xinfo_groups(self.stream)
        except redis.ResponseError as exc:
            if "no such key" in str(exc).lower():
                raise self.connector_error(
                    f"stream {self.stream!r} does not exist (create it and the group with "
                    f"XGROUP CREATE {self.stream} {self.group} $ MKSTREAM)",
                ) from exc
            raise
        if not any(_text(g.get("name")) == self.group for g in groups):
            raise self.connector_error(
                f"consumer group {self.group!r} does not exist on stream {self.stream!r} "
                f"(create it with XGROUP CREATE {self.stream} {self.group} $)",
            )

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.consumer = f"{context.topology_name}:{context.component_id}:{context.this_task_index}"
        super().open(conf, context, collector)

    def connect(self, epoch: int) -> _SpoutSession:
        return _SpoutSession(self, epoch)


# Appends ARGV[2..] to the stream KEYS[1], one entry each (MAXLEN ~ ARGV[1] unless it
# is empty), and answers per body its entry id or {error}. One command per batch: a
# pipeline of one XADD per body costs redis-py several microseconds of Python per
# command, more than the rest of a message's way through a topology.
APPEND_ALL = """
local out = {}
for i = 2, #ARGV do
  local reply
  if ARGV[1] == '' then
    reply = redis.pcall('XADD', KEYS[1], '*', 'message', ARGV[i])
  else
    reply = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'message', ARGV[i])
  end
  if type(reply) == 'table' and reply.err then
    out[i - 1] = {reply.err}
  else
    out[i - 1] = reply
  end
end
return out
"""


class _SinkSession:
    def __init__(self, sink: RedisStreamSink) -> None:
        self.sink = sink
        self.r = _client(sink.url, sink)
        self.r.ping()
        self.append_all: Any = self.r.register_script(APPEND_ALL)

    def write(self, bodies: list[bytes]) -> list[str | None]:
        s = self.sink
        if self.append_all is not None:
            maxlen = "" if s.maxlen is None else str(s.maxlen)
            try:
                replies = self.append_all(keys=[s.stream], args=[maxlen, *bodies])
            except redis.ResponseError:
                # A server that refuses scripts (an ACL without @scripting, say) gets a
                # pipeline, whose replies say what it thinks of each body.
                self.append_all = None
            else:
                return [
                    f"XADD to {s.stream!r} refused: {_text(reply[0])}"
                    if isinstance(reply, list)
                    else None
                    for reply in replies
                ]
        pipe = self.r.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(s.stream, {FIELD: body}, maxlen=s.maxlen, approximate=True)
        return [
            f"XADD to {s.stream!r} refused: {reply}" if isinstance(reply, Exception) else None
            for reply in pipe.execute(raise_on_error=False)
        ]

    def close(self) -> None:
        self.r.close()


class RedisStreamSink(BrokerSink):
    """Appends each input's ``message`` to ``stream`` (an entry ``{"message": value}``);
    ``maxlen`` trims the stream (approximately) as Redis's ``XADD MAXLEN ~`` does."""

    def __init__(
        self,
        stream: str,
        url: str = DEFAULT_URL,
        *,
        maxlen: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if maxlen is not None and (type(maxlen) is not int or maxlen < 1):
            # Unchecked, every write would be refused by Redis, failing every input.
            raise ValueError(f"RedisStreamSink maxlen must be a positive integer, got {maxlen!r}")
        self.stream = stream
        self.url = url
        self.maxlen = maxlen

    def address(self) -> str:
        return f"{redact(self.url)} stream {self.stream!r}"

    def connect(self) -> _SinkSession:
        return _SinkSession(self)
