"""What the two SQL backends (sqlite.py, postgres.py) share: the table's name and the
rows of a run of writes of one kind (base.runs), each run one statement.

The layout, the same in both (an operator can look inside with ``SELECT``)::

    <prefix>tupletree_store (namespace text, key text, value blob/bytea,
                             PRIMARY KEY (namespace, key))

One row per key; a namespace is the rows that carry its name, so a namespace with no
rows does not exist (``namespaces`` lists only non-empty ones, as the contract says).
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tupletree.store.base import Clear, Delete, Put, Write

TABLE = "tupletree_store"
# PostgreSQL truncates identifiers beyond 63 bytes: the prefix plus TABLE must fit.
MAX_PREFIX_CHARS = 63 - len(TABLE)
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def table_name(prefix: object, *, store: str) -> str:
    """``<prefix>tupletree_store``; ValueError naming the prefix unless it is a lower-case
    SQL identifier (letters, digits, ``_``; not starting with a digit) of up to
    ``MAX_PREFIX_CHARS`` characters, so the table needs no quoting to be looked at."""
    if not isinstance(prefix, str):
        raise ValueError(f"{store}: prefix must be a str, got {prefix!r}")
    if prefix and not _IDENTIFIER.fullmatch(prefix):
        raise ValueError(
            f"{store}: prefix {prefix!r} must be lower-case letters, digits and '_', not "
            "starting with a digit (it begins a table name)"
        )
    if len(prefix) > MAX_PREFIX_CHARS:
        raise ValueError(
            f"{store}: prefix {prefix[:20]!r}... is {len(prefix)} characters, over "
            f"{MAX_PREFIX_CHARS} (PostgreSQL's identifiers end at 63)"
        )
    return prefix + TABLE


def puts_last_wins(run: Sequence[Write]) -> list[tuple[str, str, bytes]]:
    """A run of Puts as (namespace, key, value) rows, the last Put of each key only, sorted
    by (namespace, key): one upsert may touch a row once, and writers that lock rows in
    one order do not deadlock one another."""
    rows: dict[tuple[str, str], bytes] = {}
    for w in run:
        assert isinstance(w, Put)
        rows[(w.namespace, w.key)] = w.value
    return [(ns, k, v) for (ns, k), v in sorted(rows.items())]


def deleted_keys(run: Sequence[Write]) -> list[tuple[str, str]]:
    """A run of Deletes as sorted, distinct (namespace, key) pairs."""
    out = set()
    for w in run:
        assert isinstance(w, Delete)
        out.add((w.namespace, w.key))
    return sorted(out)


def cleared(run: Sequence[Write]) -> list[str]:
    """A run of Clears as sorted, distinct namespaces."""
    return sorted({w.namespace for w in run if isinstance(w, Clear)})
