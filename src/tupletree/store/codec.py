"""Value encodings for the store (which keeps bytes): JSON where a person may read the
value in the backend (Storm's layouts: ``{"txid": 3, "val": 5}``), pickle where the
value is the user's own objects (a stateful bolt's state, a window's tuples).

Pickle is read back only from the topology's own store, which the topology's
credentials protect: a store is trusted as the topology's code is (ARCHITECTURE.md,
trust boundaries)."""

from __future__ import annotations

import json
import pickle
from typing import Any


def dumps_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def loads_json(data: bytes) -> Any:
    return json.loads(data)


def dumps_pickle(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def loads_pickle(data: bytes) -> Any:
    return pickle.loads(data)
