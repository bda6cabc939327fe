"""The acker protocol in one place: component and stream names, message kinds, buckets.

Messages to an acker are plain tuples ``(kind, root, value, spout_task)``; replies to a
spout task are ``(outcome, root)``. Plain tuples, not objects, because one is made per
tuple tree step on the hot path.
"""

ACKER_COMPONENT = "__acker"
SYSTEM_COMPONENT = "__system"
TICK_STREAM = "__tick"

# Messages to the acker: (kind, root_id, value, spout_task).
INIT = 0  # value = XOR of the edge ids the spout sent; spout_task = who to tell
ACK = 1  # value = edge ^ out-ack value of the acked tuple (possibly XOR-combined)
FAIL = 2  # value unused
RESET = 3  # value unused: reset_timeout, pass it on to the spout

# Replies from the acker to a spout task: (outcome, root_id).
ACKED = 10
FAILED = 11
RESET_TIMEOUT = 12
TIMED_OUT = 13  # the acker's own record expired (the spout usually expired it first)

# RotatingMap sizes. The acker and the spout each rotate once per message timeout, so a
# tree untouched for a timeout expires after between (buckets - 1) and buckets timeouts.
ACKER_BUCKETS = 3
SPOUT_PENDING_BUCKETS = 2
