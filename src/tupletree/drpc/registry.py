"""Where the DRPC spout and ReturnResults find a LocalDRPC from inside a topology.

Each task runs a pickled copy of its component, so a LocalDRPC object cannot simply be
held by the spout: the copy would be a different object. Instead LocalDRPC registers
its request book here under a random key, and the components carry only the key
(the same trick as ``tupletree.testing``'s FeederSpout). That works exactly when the
tasks run in this process, i.e. on LocalCluster; anywhere else ``lookup`` says so.
"""

from __future__ import annotations

import weakref

from tupletree.drpc.pending import PendingRequests

_books: weakref.WeakValueDictionary[str, PendingRequests] = weakref.WeakValueDictionary()


def register(key: str, book: PendingRequests) -> None:
    """Make ``book`` reachable by ``key`` (weakly: LocalDRPC keeps it alive)."""
    _books[key] = book


def unregister(key: str) -> None:
    _books.pop(key, None)


def lookup(key: str) -> PendingRequests:
    """The book of the LocalDRPC with this key; RuntimeError if not in this process."""
    book = _books.get(key)
    if book is None:
        raise RuntimeError(
            f"LocalDRPC {key} is not in this process (or was shut down): "
            "create_local_topology / DRPCSpout(function, local_drpc) work with "
            "LocalCluster only; on SparkCluster use create_remote_topology() with a "
            "DRPCServer"
        )
    return book
