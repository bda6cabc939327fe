"""Running tupletree workers on Apache Spark.

Importing this package does not import pyspark or start a JVM; the modules do that
when they are used:

- ``session``: get or build the SparkSession (Java check, PYSPARK_PYTHON, local master).
- ``slots``: how many task slots Spark has, and how many are free.
- ``reservations``: the slots this process's launchers hold.
- ``job``: the Spark jobs, one per worker, one long-running task each, submitted again
  while the topology lives.
- ``settings``: what the launcher reads from the session's settings.
- ``worker_task``: the Spark task that runs one worker's ``worker_main``.
- ``launcher``: ``WorkerLauncher``, the driver side: the socket and job shell around
  ``tupletree.distributed.driver_state.DriverState`` (which decides restarts with
  ``distributed/supervision.py``).
- ``cluster``: ``SparkCluster``, a topology as ``topology.workers`` launched workers.
- ``errors``: what a failed launch raises; the hint when executors cannot import.
- ``placement``: where the workers run and how long executors took to be ready.
- ``requirements`` and ``pack``: ``tupletree pack``, the executors' environment as an
  archive for ``spark.archives``.
- ``standalone``: a standalone master and workers on loopback addresses (tests, bench).

What a worker runs, and how workers talk to each other and to the driver, is not
Spark's business: it lives in ``tupletree.distributed``.
"""
