"""What runs a topology across processes, without Spark: any launcher can use it.

- ``scheduler``: which worker runs which tasks (Storm's even scheduler).
- ``frames``, ``transport``: tuples and acker messages between workers over ZeroMQ,
  and how a batch of them is laid out on the wire.
- ``sealing``: what makes a data frame authentic, addressed to one worker, and new
  (a MAC per link and a number per frame, replays refused), pure.
- ``control``: the control protocol: every message between the driver and its
  workers, and the signed frames that carry them.
- ``control_client``: ``ControlClient``, a worker's end of the control channel.
- ``control_service``: the driver's end, a ROUTER on a thread of its own.
- ``driver_state``: ``DriverState``, everything the driver knows about its workers, a
  pure object: every worker message in, the messages to send and events out.
- ``registration``: registration and the peer table, a pure state machine (in it).
- ``supervision``: restarts, backoff, crash loops and hangs, pure (in it).
- ``rejections``: counting and reporting refused frames, with bounds.
- ``waiting``: the one wait helper (a value under a condition, or a timeout).
- ``processes``: waiting for local worker processes to end.
- ``waker``: waking a control I/O thread that waits in a zmq poll.
- ``worker_main``: ``TopologyWorkerMain``, the body of one topology worker.

Nothing here starts or needs a SparkSession; ``tupletree.spark`` launches these workers
as Spark tasks.
"""
