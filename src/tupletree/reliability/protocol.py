"""The acker protocol in one place: component and stream names, message kinds, buckets.

Messages to an acker are plain tuples ``(kind, root, value, spout_task)``; replies to a
spout task are ``(outcome, root)``. Plain tuples, not objects, because one is made per
tuple tree step on the hot path.
"""

from typing import Final

ACKER_COMPONENT: Final = "__acker"
SYSTEM_COMPONENT: Final = "__system"
TICK_STREAM: Final = "__tick"
# Ticks for the runtime's own use inside a component (CoordinatedBolt's request expiry),
# on a stream of their own so they never mix with the user's tick tuples.
SYSTEM_TICK_STREAM: Final = "__system_tick"

# Messages to the acker: (kind, root_id, value, spout_task).
INIT: Final = 0  # value = XOR of the edge ids the spout sent; spout_task = who to tell
ACK: Final = 1  # value = edge ^ out-ack value of the acked tuple (possibly XOR-combined)
FAIL: Final = 2  # value unused
RESET: Final = 3  # value unused: reset_timeout, pass it on to the spout

# Replies from the acker to a spout task: (outcome, root_id).
ACKED: Final = 10
FAILED: Final = 11
RESET_TIMEOUT: Final = 12
TIMED_OUT: Final = 13  # the acker's own record expired (the spout usually expired it first)

# RotatingMap sizes. The acker and the spout each rotate once per message timeout, so a
# tree untouched for a timeout expires after between (buckets - 1) and buckets timeouts.
ACKER_BUCKETS: Final = 3
SPOUT_PENDING_BUCKETS: Final = 2
