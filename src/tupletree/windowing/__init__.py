"""Windowed bolts: Storm's (sliding and tumbling, by count or duration, in processing or
event time, with watermarks and late tuples) and session windows (beyond Storm).
docs/windowing.md is the user's guide.

Modules: lengths (Count, Duration), policies (eviction and trigger policies),
manager (WindowManager: the pure window core), watermarks (WatermarkGenerator),
sessions (SessionManager), window (TupleWindow, DetachedTuple), spec (WindowSpec and
its checks), bolt (WindowedBolt, what users extend), executor (the Bolt the runtime
runs); persistent (StatefulWindowedBolt: a windowed bolt with checkpointed state, its
window checkpointed too with with_persistence) and stored (a persistent window's tuples
in the store). A windowed bolt is a plain Bolt to the runtime: this package imports
topology/, config and errors, nothing of runtime/ or the clusters.
"""

from tupletree.windowing.bolt import WindowedBolt
from tupletree.windowing.executor import (
    LATE_TUPLE_FIELD,
    TimestampError,
    WindowedBoltExecutor,
    WindowFailedError,
    WindowFullError,
)
from tupletree.windowing.lengths import Count, Duration
from tupletree.windowing.persistent import StatefulWindowedBolt
from tupletree.windowing.stored import (
    PersistentTupleWindow,
    UnpicklableTupleError,
    UnsupportedOperationError,
)
from tupletree.windowing.window import DetachedTuple, TupleWindow

__all__ = [
    "LATE_TUPLE_FIELD",
    "Count",
    "DetachedTuple",
    "Duration",
    "PersistentTupleWindow",
    "StatefulWindowedBolt",
    "TimestampError",
    "TupleWindow",
    "UnpicklableTupleError",
    "UnsupportedOperationError",
    "WindowFailedError",
    "WindowFullError",
    "WindowedBolt",
    "WindowedBoltExecutor",
]
