"""Cost of HeldTuples.add (the stall watch of a Bolt task's held tuples), per call:
``python bench/held_tuples.py``. Three cases: the table full and nothing settled, full
with the oldest tuple settling before each add (a sink holding more inputs than the
limit), and never full (1,000 held)."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from tupletree.runtime.stalls import HELD_LIMIT, HeldTuples


class Held:
    __slots__ = ("settled",)

    def __init__(self) -> None:
        self.settled = False

    def is_settled(self) -> bool:
        return self.settled


def per_add(n: int, fill: int, settle_lag: int | None) -> float:
    """Microseconds per add over ``n`` adds after ``fill`` unsettled ones; with
    ``settle_lag``, the tuple added ``settle_lag`` adds earlier settles before each."""
    held = HeldTuples(time.monotonic)
    tuples = [Held() for _ in range(fill + n)]
    for t in tuples[:fill]:
        held.add(t)
    start = time.perf_counter()
    for i in range(fill, fill + n):
        if settle_lag is not None and i >= settle_lag:
            tuples[i - settle_lag].settled = True
        held.add(tuples[i])
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    print(f"HeldTuples.add, limit {HELD_LIMIT}, microseconds per call:")
    print(f"  full, nothing settled:  {per_add(2_000, HELD_LIMIT, None):8.2f}")
    print(f"  full, oldest settling:  {per_add(20_000, HELD_LIMIT, HELD_LIMIT):8.2f}")
    print(f"  1,000 held, never full: {per_add(100_000, 0, 1_000):8.2f}")


if __name__ == "__main__":
    main()
