"""What runs a topology across processes, without Spark: any launcher can use it.

- ``scheduler``: which worker runs which tasks (Storm's even scheduler).
- ``frames``, ``transport``: tuples and acker messages between workers over ZeroMQ,
  and how a batch of them is laid out on the wire.
- ``control``: the control protocol: every message between the driver and its
  workers, and the signed frames that carry them.
- ``control_client``: ``ControlClient``, a worker's end of the control channel.
- ``control_service``: the driver's end, a ROUTER on a thread of its own.
- ``registration``: registration and the peer table, a pure state machine.
- ``dispatch``: the driver's one dispatcher of worker messages.
- ``rejections``: counting and reporting refused frames, with bounds.
- ``processes``: waiting for local worker processes to end.
- ``waker``: waking a control I/O thread that waits in a zmq poll.
- ``worker_main``: ``TopologyWorkerMain``, the body of one topology worker.

Nothing here starts or needs a SparkSession; ``tupletree.spark`` launches these workers
as Spark tasks.
"""
