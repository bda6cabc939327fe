"""BatchInbox: the inbox of a task that takes Batches (a BatchBolt's).

A deque like every task's inbox, of a class of its own so that whoever fills inboxes
from another worker's frames (distributed/transport.py) can tell, from the inbox alone,
which tasks take a frame's runs as Batches rather than one Tuple per item. Kept out of
the compiled modules: mypyc compiles no subclass of a builtin.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class BatchInbox(deque[Any]):
    """A task's inbox that takes Batches as well as Tuples."""

    __slots__ = ()
