"""A picklable handle to state shared by a test and its components' task copies."""

from __future__ import annotations

import itertools
from typing import Any

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
