"""A hash of grouping keys that is the same in every process.

Python's ``hash`` of a str is salted per process (PYTHONHASHSEED), so two workers would
send the same word to different tasks. Fields grouping hashes with CRC-32 of a canonical
encoding instead, and follows Python's rule that equal keys hash alike (the routers
also cache a key's task in a dict, which goes by Python's equality):

- str and bytes by content, ints/floats/bools/None by value (1, 1.0 and True alike);
  subclasses of these (IntEnum, StrEnum...) as the plain value they equal, and other
  numbers (Decimal, Fraction) as the int or float they equal;
- tuples and lists element-wise, in order; dicts and sets without regard to order
  (their iteration order depends on insertion, or for sets on the salted hash);
- anything else structurally: its class's module and qualified name plus, recursively,
  what ``__reduce_ex__`` (pickle's protocol) says it is made of. Neither the class
  needs to be importable (a class shipped by value to a Spark worker hashes there as on
  the driver) nor the bytes of a pickle to be stable.

Keys nested deeper than ``MAX_DEPTH`` (a cycle, say) raise TypeError. A class whose
``__eq__`` ignores part of its state breaks the rule above; group on plain fields then.
"""

from __future__ import annotations

import numbers
import struct
import types
import zlib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

_MASK = (1 << 32) - 1
MAX_DEPTH = 64
_DICT_TAG = 0x2545F491
_SET_TAG = 0x68E31DA4
_OBJ_TAG = 0x1B873593


def stable_hash(value: Any, depth: int = 0) -> int:
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
        return stable_hash_values(value, depth)
    return _other_hash(value, depth)


def stable_hash_values(values: Any, depth: int = 0) -> int:
    """Combine element hashes in order (for multi-field keys)."""
    if depth >= MAX_DEPTH:
        raise TypeError(f"a grouping key is nested deeper than {MAX_DEPTH} levels (a cycle?)")
    h = 0x345678
    for v in values:
        h = ((h * 1000003) ^ stable_hash(v, depth + 1)) & _MASK
    return h


def _unordered(items: Any, depth: int, tag: int) -> int:
    """Order-independent: the sum of the items' hashes, with their count."""
    if depth >= MAX_DEPTH:
        raise TypeError(f"a grouping key is nested deeper than {MAX_DEPTH} levels (a cycle?)")
    total = 0
    n = 0
    for item in items:
        total += stable_hash(item, depth + 1)
        n += 1
    return ((total * 1000003) ^ n ^ tag) & _MASK


def _name_hash(obj: Any) -> int:
    name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj.__name__)}"
    return zlib.crc32(name.encode("utf-8", "surrogatepass")) ^ _OBJ_TAG


def _other_hash(value: Any, depth: int) -> int:
    # Subclasses of the plain types equal their plain value (StrEnum("a") == "a"); int
    # and float subclasses (IntEnum) are numbers, below.
    if isinstance(value, str):
        return stable_hash(str.__str__(value))
    if isinstance(value, bytes):
        return stable_hash(bytes(value))
    if isinstance(value, (tuple, list)):
        return stable_hash_values(value, depth)
    if isinstance(value, Mapping):
        return _unordered(value.items(), depth, _DICT_TAG)
    if isinstance(value, AbstractSet):
        return _unordered(value, depth, _SET_TAG)
    if isinstance(value, numbers.Number):
        return _number_hash(value)
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return _name_hash(value)
    return _structural_hash(value, depth)


def _number_hash(value: Any) -> int:
    try:
        as_int = int(value)
        if as_int == value:
            return stable_hash(as_int)
        as_float = float(value)
        if as_float == value:
            return stable_hash(as_float)
    except (TypeError, ValueError, ArithmeticError):
        pass
    # Python's hash of a number is not salted, and equal numbers hash alike.
    return zlib.crc32(str(hash(value)).encode())


def _structural_hash(value: Any, depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise TypeError(f"a grouping key is nested deeper than {MAX_DEPTH} levels (a cycle?)")
    cls = type(value)
    try:
        reduced = value.__reduce_ex__(4)
    except Exception as exc:
        raise TypeError(
            f"a grouping key of type {cls.__qualname__} cannot be hashed: it cannot be "
            f"taken apart as pickle would ({type(exc).__name__}); group on plain fields"
        ) from exc
    h = _name_hash(cls)
    if isinstance(reduced, str):  # a module-level singleton, named
        return (h * 1000003 ^ stable_hash(reduced)) & _MASK
    # (callable, args, state, list items, dict items): the callable is the class or a
    # constructor helper (copyreg.__newobj__), named by the class above.
    parts = list(reduced[1:5])
    if len(parts) > 2 and parts[2] is not None:
        parts[2] = list(parts[2])
    if len(parts) > 3 and parts[3] is not None:
        parts[3] = dict(parts[3])
    for part in parts:
        h = ((h * 1000003) ^ stable_hash(part, depth + 1)) & _MASK
    return h
