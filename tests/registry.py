"""State shared by a test and its components' task copies (which are pickled): a Box
handle (this process only), and journals (any process)."""

from __future__ import annotations

import itertools
from typing import Any

from tupletree.testing import SharedList

_boxes: dict[int, dict[str, Any]] = {}
_ids = itertools.count()


class Box:
    """Pickles as its id; every copy in this process sees the same dict."""

    def __init__(self) -> None:
        self.id = next(_ids)
        _boxes[self.id] = {}

    def get(self) -> dict[str, Any]:
        return _boxes[self.id]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_box, (self.id,))


def _box(box_id: int) -> Box:
    box = Box.__new__(Box)
    box.id = box_id
    return box


# -- a journal that every copy of a component can write to, in any process -----------


def new_journal() -> SharedList:
    """A fresh journal: components hold it (it pickles as a handle to this process's list,
    which SparkCluster's worker processes reach over an authenticated local socket)."""
    return SharedList("journal")


def record(journal: SharedList, entry: Any) -> None:
    journal.append(entry)


def entries(journal: SharedList) -> list[Any]:
    return journal.items()
