"""Group keys a dict can hold: Trident groups, joins and stores by the values of its
group fields, and a value may be a list (a tag list, say), which no dict takes.

Decision: a list is grouped as the tuple of its items (recursively), which the fields
grouping routes alike (runtime/hashing.py) and a map state stores alike (as a JSON
list). Converted only when a dict refused the key, so the common hashable key costs
nothing more; downstream, the group field's value is then a tuple. A value that is still
unhashable (a dict, a set) is a TypeError naming the operation and the fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def freeze_lists(value: Any) -> Any:
    """``value`` with every list in it (at any depth) a tuple."""
    if isinstance(value, list | tuple):
        return tuple(freeze_lists(v) for v in value)
    return value


def group_key(key: Any, fields: Sequence[str], who: str) -> Any:
    """``key`` with its lists as tuples; TypeError naming ``who`` and ``fields`` for a
    value that cannot be grouped on even so."""
    frozen = freeze_lists(key)
    try:
        hash(frozen)
    except TypeError as exc:
        raise TypeError(
            f"{who}: cannot group on the value {key!r} of field(s) {list(fields)}: {exc}; "
            "a group's values must be hashable (str, numbers, None, tuples or lists of "
            "them)"
        ) from None
    return frozen
