"""The executor of a BatchBolt's task: hands its inbox to ``execute_batch`` a batch at a
time.

Its inbox holds Batches (from another worker's frame, or from a BatchBolt of this worker)
and Tuples (from every other collector of this worker, and ticks). A Batch is executed
as it came; Tuples queued in a row from one source are made into one Batch first
(``Batch.of_tuples``). A turn takes batches until ``limit`` rows were executed; a Batch
is never split, so a turn may run over ``limit`` by one batch, which a frame bounds.
What the turn's batches emit to batch bolts and to other workers is delivered once, at
the turn's end, one Batch per target (runtime/batch_collector.py says why).

It is a BoltExecutor with ``basic`` set, so the worker treats it as a BasicBolt's
(``prepare(conf, context)``, ticks, cleanup, no held-tuple watch: it settles every
input in the turn it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from tupletree.errors import FailedException
from tupletree.runtime.batch_collector import BatchCollector
from tupletree.runtime.collectors import OutputCollector, TaskWiring
from tupletree.runtime.executors import BoltExecutor
from tupletree.runtime.inboxes import BatchInbox
from tupletree.runtime.target_kinds import target_kinds
from tupletree.topology.batch import Batch
from tupletree.topology.tuple import Tuple


class BatchBoltExecutor(BoltExecutor):
    def __init__(
        self, task_id: int, component_id: str, bolt: Any, report: Callable[..., None]
    ) -> None:
        super().__init__(task_id, component_id, bolt, True, report)
        # Marks this task's inbox as one that takes Batches (distributed/transport.py
        # hands it a frame's runs as Batches, not Tuples).
        self.inbox = BatchInbox()
        self.batch_collector: BatchCollector | None = None

    def connect(self, wiring: TaskWiring) -> OutputCollector:
        out = self.collector = OutputCollector(wiring)
        kinds = wiring.target_kinds
        if not kinds:  # wired by hand (tests): every task takes Tuples, on this worker
            kinds = target_kinds(list(wiring.inboxes), set(), set())
        self.batch_collector = BatchCollector(out, kinds)
        return out

    def run_batch(self, limit: int) -> int:
        inbox = self.inbox
        started = perf_counter()
        out = self.collector
        assert out is not None
        bc = self.batch_collector
        assert bc is not None
        execute_batch = self.bolt.execute_batch
        pop = inbox.popleft
        rows = 0
        while inbox and rows < limit:
            if self.halt:
                break  # the rest stay queued: the worker is stopping
            item = pop()
            batch: Batch
            if type(item) is Batch:
                batch = item
            else:
                first: Tuple = item
                src = first._src
                tuples = [first]
                # Tuples in a row from one source make one Batch.
                while inbox and rows + len(tuples) < limit:
                    nxt = inbox[0]
                    if type(nxt) is not Tuple or nxt._src is not src:
                        break
                    tuples.append(pop())
                batch = Batch.of_tuples(tuples)
            rows += len(batch)
            bc.begin(batch)
            try:
                execute_batch(batch, bc)
            except FailedException:
                bc.finish(False)
                continue
            except BaseException as exc:
                bc.finish(False)
                self.report(exc, "execute_batch")
                continue
            bc.finish(True)
        bc.deliver()
        self.metrics.executed += rows
        out.flush()
        self._timed(started, rows)
        return rows
