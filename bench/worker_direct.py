"""The benchmark word count driven directly (no LocalCluster thread, no metrics polling):
``python bench/worker_direct.py [sentences]``. Used by bench/instructions.sh."""

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
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    worker = Worker("bench", wordcount.topology(total), validate(wordcount.conf()), RealClock().now)
    worker.start()
    start = time.perf_counter()
    while worker.step(worker.now()):
        pass
    print(f"{total / (time.perf_counter() - start):,.0f} sentences/s")


if __name__ == "__main__":
    main()
