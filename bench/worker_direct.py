"""The benchmark word count driven directly (no LocalCluster thread, no metrics polling):
``python bench/worker_direct.py [sentences] [--plain]`` (--plain: count is a plain Bolt
that acks itself). Used by bench/instructions.sh."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import wordcount
from tupletree.config import validate
from tupletree.runtime.clock import RealClock
from tupletree.runtime.worker import Worker


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--plain"]
    total = int(args[0]) if args else 300_000
    topology = wordcount.topology(total, plain_count="--plain" in sys.argv)
    worker = Worker("bench", topology, validate(wordcount.conf()), RealClock().now)
    worker.start()
    start = time.perf_counter()
    while worker.step(worker.now()):
        pass
    print(f"{total / (time.perf_counter() - start):,.0f} sentences/s")


if __name__ == "__main__":
    main()
