"""What a SparkCluster's ``metrics()`` costs the driver after a long crash loop, with the
ended attempts folded into one total (``DriverState``) against the old way (every
attempt's last snapshot kept and all of them merged on each read).

    python bench/driver_metrics.py [attempts] [tasks]

Default: 17,280 attempts (a day of a worker dying every 5 s) of a worker with 10 tasks.
Prints, for both, what is kept (pickled size: a lower bound of the memory) and the time
of one read (the merge).
"""

from __future__ import annotations

import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupletree.distributed.control import Envelope, Metrics, Register
from tupletree.distributed.driver_state import DriverState
from tupletree.runtime.metrics import COUNTERS, merge_snapshots


def main(attempts: int = 17_280, tasks: int = 10) -> None:
    every: dict[int, dict] = {}  # the old way: attempt -> its last snapshot
    state = DriverState("bench", 1)
    for attempt in range(attempts):
        snapshot = {t: {**dict.fromkeys(COUNTERS, 5), "pending": 0} for t in range(tasks)}
        every[attempt] = snapshot
        route = f"r{attempt}".encode()
        state.registry.register(route, 0, attempt, Register(1, "h", "tcp://w"))
        state.on(route, Envelope(0, attempt, Metrics(snapshot, [], True, {}, {})), attempt)
    t0 = time.perf_counter()
    old = merge_snapshots(list(every.values()))
    t1 = time.perf_counter()
    new = state.snapshot()
    t2 = time.perf_counter()
    assert old == new, "folding changed the figures"
    kept_old = len(pickle.dumps(every)) / 1e6
    kept_new = len(pickle.dumps((state.folded, state.reports))) / 1e3
    print(f"{attempts} attempts of a worker with {tasks} tasks:")
    print(f"  every attempt kept: {kept_old:.1f} MB, {1e3 * (t1 - t0):.1f} ms per metrics()")
    print(f"  ended ones folded:  {kept_new:.1f} kB, {1e3 * (t2 - t1):.3f} ms per metrics()")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
