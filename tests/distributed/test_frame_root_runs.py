"""A tree's rows cross between workers whatever the length of their run.

A frame stores each run of rows in one tree as (root, count), the count in one byte, so a
run longer than ``MAX_ROOT_RUN`` is cut into several. Tuples of one tree in a row (a
spout's fan-out, a bolt's emits anchored to one input) and a BatchBolt's buffered emits
(a Batch, joined to the run of the same tree just before it) bring runs of any length:
every length, the ones at and just past a multiple of the limit included, must be cut
right, or the frame cannot be encoded and every tree in it is failed and replayed, on
every attempt (the replay has the same rows).
"""

from __future__ import annotations

from typing import Any

import pytest

from tupletree.distributed.frames import MAX_ROOT_RUN, decode, encode
from tupletree.distributed.transport import _dumps
from tupletree.topology.batch import Batch
from tupletree.topology.tuple import Tuple

from ..topology.test_batch import as_tuples
from .test_frames import SOURCES

ROOT = 2**63 + 7  # one int object: a tree's rows share their root (frames go by identity)

LENGTHS = sorted({0, 1, 2} | {k * MAX_ROOT_RUN + d for k in (1, 2, 3) for d in (-1, 0, 1, 2)})
BEFORE = [0, 1, MAX_ROOT_RUN - 1, MAX_ROOT_RUN, MAX_ROOT_RUN + 1, 2 * MAX_ROOT_RUN + 1]


def _rows(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        for tup in as_tuples(item) if type(item) is Batch else [item]:
            out.append((tup.values, tup._tree_edges()))
    return out


@pytest.mark.parametrize("before", BEFORE)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("as_batch", [False, True])
def test_a_run_of_one_tree_of_any_length_crosses_whole(
    length: int, before: int, as_batch: bool
) -> None:
    """``before`` Tuples of a tree, then a Batch of ``length`` rows of the same tree
    (none for 0): the frame encodes, and every row arrives with its values and its
    tree's edge, as Tuples or as one Batch."""
    src = SOURCES[0]
    sent: list[Any] = [Tuple([f"t{i}"], src, ROOT, 1 + i) for i in range(before)]
    rows = [Tuple([f"b{i}"], src, ROOT, 10_000 + i) for i in range(length)]
    if rows:
        sent.append(Batch.of_tuples(rows))
    if not sent:
        return
    got: list[Any] = []
    data = encode({1: list(sent)}, _dumps)
    n = decode(data, {}, {1: got.extend}, batch_tasks={1} if as_batch else set())
    assert n == before + length
    assert _rows(got) == _rows(sent)
