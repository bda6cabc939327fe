"""A hash of grouping keys that is the same in every process.

Python's ``hash`` of a str is salted per process (PYTHONHASHSEED), so two workers would
send the same word to different tasks. Fields grouping hashes with CRC-32 of a canonical
encoding instead: str and bytes by content, ints/floats/bools/None by value, tuples and
lists element-wise, anything else by its pickle (stable for plain data).
"""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any

_MASK = (1 << 32) - 1


def stable_hash(value: Any) -> int:
    """A non-negative 32-bit hash, identical across processes and runs."""
    cls = type(value)
    if cls is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if cls is int or cls is bool:
        return (
            zlib.crc32(value.to_bytes(16, "little", signed=True))
            if -(1 << 127) <= value < (1 << 127)
            else zlib.crc32(str(value).encode())
        )
    if cls is bytes:
        return zlib.crc32(value) ^ 0x5BD1E995
    if cls is float:
        if value.is_integer() and abs(value) < 2**63:
            # 1.0 and 1 are equal keys in Python, so they must group together.
            return stable_hash(int(value))
        return zlib.crc32(struct.pack("<d", value))
    if value is None:
        return 0x9E3779B9
    if cls is tuple or cls is list:
        return stable_hash_values(value)
    return zlib.crc32(pickle.dumps(value, protocol=4))


def stable_hash_values(values: Any) -> int:
    """Combine element hashes in order (for multi-field keys)."""
    h = 0x345678
    for v in values:
        h = ((h * 1000003) ^ stable_hash(v)) & _MASK
    return h
