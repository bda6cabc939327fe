"""runtime/gc_tuning.py: the GC tuned for a worker's loop (SparkCluster's workers) and
while a LocalCluster exists, and the process's own settings restored after."""

from __future__ import annotations

import gc

import pytest

from tupletree import LocalCluster
from tupletree.runtime.gc_tuning import GC_YOUNG_THRESHOLD, worker_gc


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


def test_local_clusters_tune_while_one_exists_and_restore_after_the_last():
    """Overlapping LocalClusters share one tuning: the process's settings come back when
    the last one shuts down, not the first; tune_gc=False leaves the process alone."""
    before = gc.get_threshold()
    with LocalCluster(tune_gc=False):
        assert gc.get_threshold() == before
    first = LocalCluster()
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    second = LocalCluster(simulate_time=True)
    first.shutdown()
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
    second.shutdown()
    second.shutdown()  # a second shutdown releases nothing more
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
