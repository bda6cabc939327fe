"""The bare-loop baseline: the same word count and XOR tracking, hand-written.

No framework: one loop that makes ids, splits, counts, and keeps the acker's XOR value
per sentence, completing each tree at zero. What tupletree's overhead is measured
against (issue: "a bare hand-written Python loop ... about 155,000 sentences/s").
"""

from __future__ import annotations

import random
import time

from bench.wordcount import sentences


def run(total: int) -> float:
    """Process ``total`` sentences; return sentences/s."""
    rand = random.Random(1).getrandbits
    texts = sentences()
    counts: dict[str, int] = {}
    ledger: dict[int, int] = {}
    acked = 0
    start = time.perf_counter()
    for n in range(total):
        root = rand(64) | 1
        edge = rand(64) | 1
        ledger[root] = edge  # init: the edge sent to split
        ack = edge  # split's ack: its own edge ^ the edges of its children
        for word in texts[n & 63].split():
            child = rand(64) | 1
            ack ^= child
            counts[word] = counts.get(word, 0) + 1  # count executes the word ...
            ledger[root] ^= child  # ... and acks it
        val = ledger[root] ^ ack
        if val == 0:
            del ledger[root]
            acked += 1
        else:
            ledger[root] = val
    elapsed = time.perf_counter() - start
    assert acked == total, (acked, total)
    return total / elapsed
