"""State shared by a test and its components' task copies (which are pickled), in
this process: a Box handle, and journals keyed by string."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections import defaultdict
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


# -- a journal that every pickled copy of a component can write to -------------------

_JOURNAL_LOCK = threading.Lock()
_JOURNAL: dict[str, list[Any]] = defaultdict(list)


def new_journal() -> str:
    """A fresh journal key: components hold the key (a str pickles as itself)."""
    return f"journal-{uuid.uuid4().hex}"


def record(key: str, entry: Any) -> None:
    with _JOURNAL_LOCK:
        _JOURNAL[key].append(entry)


def entries(key: str) -> list[Any]:
    with _JOURNAL_LOCK:
        return list(_JOURNAL[key])
