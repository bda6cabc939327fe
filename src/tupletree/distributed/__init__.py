"""What runs a topology across processes, without Spark: any launcher can use it.

- ``scheduler``: which worker runs which tasks (Storm's even scheduler).
- ``frames``, ``transport``: tuples and acker messages between workers over ZeroMQ,
  and how a batch of them is laid out on the wire.
- ``control``: the signed control frames between the driver and its workers.
- ``control_client``: ``ControlClient``, a worker's end of the control channel.
- ``worker_main``: ``TopologyWorkerMain``, the body of one topology worker.

Nothing here starts or needs a SparkSession; ``tupletree.spark`` launches these workers
as Spark tasks.
"""
