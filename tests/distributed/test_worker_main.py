"""distributed/worker_main.py: the parts of a topology worker's body that need no
driver (the loop itself runs in every SparkCluster test, under tests/spark/)."""

from __future__ import annotations

import gc

import pytest

from tupletree.distributed.worker_main import GC_YOUNG_THRESHOLD, worker_gc


def test_worker_gc_tunes_the_young_generation_and_restores_it():
    """Inside a worker's loop the young generation is collected less often and start-up
    objects are frozen; afterwards (Spark may reuse the process) all is as before, even
    when the loop raised."""
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), worker_gc():
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()
        raise RuntimeError("the loop failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
