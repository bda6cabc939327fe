"""The plain data a cluster answers with, below every layer (it imports nothing of
tupletree's): the runtime builds these records, the distributed layer carries them to
the driver, and ``ui/`` and ``testing/`` read them through the ``Cluster`` protocol.

- ``errors.py``: ``TaskError`` (a task's exception) and ``WorkerEvent`` (a worker's own
  error, a restart), what ``cluster.error_records`` and ``worker_events`` return.
- ``metrics.py``: the declared shape of ``cluster.metrics`` (``ComponentMetrics``) and
  of a worker's per-task report (``TaskSnapshot``).
- ``stalls.py``: ``TimedOutTree`` and ``Holder``, what ``cluster.timed_out`` returns.
"""
