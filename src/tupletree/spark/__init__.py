"""Running tupletree workers on Apache Spark.

Importing this package does not import pyspark or start a JVM; the modules do that
when they are used:

- ``session``: get or build the SparkSession (Java check, PYSPARK_PYTHON, local master).
- ``slots``: how many task slots Spark has, and how many are free.
- ``launcher``: ``WorkerLauncher``, the driver side: one long-running Spark task per
  worker, plus the control service workers register with.
- ``worker_side``: ``ControlClient``, what a worker uses to talk to that service.
- ``protocol``: the signed, pickled control frames both sides exchange.
- ``cluster``: ``SparkCluster``, a topology as ``topology.workers`` launched workers.
- ``scheduler``: which worker runs which tasks (Storm's even scheduler).
- ``worker_process``: the body of a worker in its Spark task (the scheduler loop).
- ``transport``, ``frames``: tuples and acker messages between workers over ZeroMQ,
  and how a batch of them is laid out on the wire.
- ``errors``: what a failed launch raises.
"""
