"""Frames: how a batch of items bound for one peer worker is laid out on the wire.

A remote task's inbox is a plain list held by its peer's ``PeerBuffer``: an emit to a
task on another worker is one ``list.append``, as cheap as a local delivery. At each
flush the buffer becomes one frame, pickled once.

Decisions:

- A frame is columnar, not a list of per-item records. Per target task it holds runs of
  items of one kind, in the order they were appended: tuples from one source (a table
  of sources is sent once per frame), runtime messages (acker messages and replies to
  spouts: tuples of ids and small ints), or anything else (pickled as it is). The
  order of items bound for one task is kept; items bound for different tasks may cross
  in another order, as Storm promises order only per pair of tasks (the acker accepts
  an ack before its init; nothing else orders across tasks).
- Integers travel as ``array`` bytes (8 bytes each, native byte order), which pickle
  and unpickle as one blob instead of one object per number: the roots and edges of
  tuples, and the runtime messages flattened into one column. Tuples in several trees
  (rare) carry their ``{root: edge}`` dict in a side table keyed by position.
- Values are one flat list for the whole frame: a tuple's values are as many as its
  source declares fields (every emit checks it), so the receiver slices them back.
  Pickle then writes one list instead of a list per tuple, and loads one: loading was
  the costliest step of a frame, most of it filling a list per tuple.

Each of these choices was measured with callgrind (``bash bench/instructions_transport.sh``
and ``bash bench/instructions_two.sh``); the figures are in notes/performance.md.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

# (source table, runs, roots, edges, values, multi-tree edges, runtime messages, other
# items). runs: for each target task, [task, number of runs, then (code, length) per
# run]: code >= 0 is a run of tuples from source ``table[code]``; a code <= -3 a run of
# runtime messages of width -code - 1 (tuples of ids and small ints, flattened into one
# column); OTHERS a run of other items, pickled as they are.
Frame = tuple[
    list[tuple[Any, ...]],
    list[int],
    bytes,
    bytes,
    list[Any],
    dict[int, Any],
    bytes,
    list[Any],
]

OTHERS = -1
_NO_RUN = -2
# Widths of the runtime's own messages: acker messages (kind, root, value, spout task)
# and replies to spouts (outcome, root); see reliability/protocol.py.
MESSAGE_WIDTHS = (2, 4)

# Ids are unsigned 64-bit. array's "L" (C unsigned long) converts a Python int through
# a plain loop over its digits, while "Q" (unsigned long long) goes through CPython's
# generic byte-array conversion, several times slower per id (notes/performance.md).
# "L" is 8 bytes on 64-bit Linux and macOS; where it is not (Windows), "Q".
ID_TYPECODE = "L" if array("L").itemsize == 8 else "Q"


class PeerBuffer:
    """Items waiting for the next flush to one peer: a list per target task."""

    __slots__ = ("lists",)

    def __init__(self) -> None:
        self.lists: dict[int, list[Any]] = {}

    def inbox(self, task: int) -> list[Any]:
        """The list that stands for ``task``'s inbox: only ever appended to and, by the
        transport, emptied. What waits here never counts against a worker's own
        backpressure (Worker.over_limit reads its local bolts' inboxes;
        Transport.blocked covers this)."""
        items = self.lists.get(task)
        if items is None:
            items = self.lists[task] = []
        return items

    def __len__(self) -> int:
        return sum([len(items) for items in self.lists.values()])

    def take(self) -> dict[int, list[Any]]:
        """The waiting items (task -> items), leaving every list empty.

        Copied out, not swapped: the lists are the inboxes whose ``append`` the
        collectors hold. And taken before encoding, because reporting an item that
        cannot be serialized fails its trees, which can append to these very lists."""
        taken: dict[int, list[Any]] = {}
        for task, items in self.lists.items():
            if items:
                taken[task] = items.copy()
                items.clear()
        return taken


def encode(lists: dict[int, list[Any]], message_columns: bool = True) -> Frame:
    """The frame (plain data, ready to pickle) for the items in ``lists`` (task -> items).

    Runtime messages (Python tuples of 2 or 4 non-negative 64-bit ints) go in one integer
    column; should a tuple of that width hold anything else, the frame is encoded again
    with ``message_columns`` off, every such tuple pickled as it is.

    Raises ValueError for a Tuple whose values do not match its source's fields (no
    collector emits one)."""
    index: dict[TupleSource, int] = {}
    table: list[tuple[Any, ...]] = []
    arities: list[int] = []
    runs: list[int] = []
    roots: list[Any] = []
    edges: list[Any] = []
    values: list[Any] = []
    multi: dict[int, Any] = {}
    messages: list[Any] = []
    others: list[Any] = []
    for task, items in lists.items():
        n = len(items)
        if n == 0:
            continue
        runs.append(task)
        count_at = len(runs)
        runs.append(0)
        code = _NO_RUN
        length = 0
        last_src: TupleSource | None = None
        for k in range(n):
            item = items[k]
            if type(item) is Tuple:
                tup: Tuple = item
                src = tup._src
                if src is not last_src:
                    i = index.get(src)
                    if i is None:
                        i = index[src] = len(table)
                        table.append((src.component, src.stream, src.task, tuple(src.fields)))
                        arities.append(len(src.fields))
                    last_src = src
                    item_code = i
                else:
                    item_code = code
                if tup._roots is not None:
                    multi[len(roots)] = tup._roots
                roots.append(tup._root)
                edges.append(tup._edge)
                vals = tup.values
                arity = arities[item_code]
                if len(vals) != arity:
                    raise ValueError(
                        f"tuple from {src.component!r} on stream {src.stream!r} has "
                        f"{len(vals)} value(s) for {arity} field(s)"
                    )
                if arity == 1:
                    values.append(vals[0])
                else:
                    values.extend(vals)
            elif message_columns and type(item) is tuple and len(item) in MESSAGE_WIDTHS:
                messages.extend(item)
                item_code = -1 - len(item)
                last_src = None
            else:
                others.append(item)
                item_code = OTHERS
                last_src = None
            if item_code == code:
                length += 1
            else:
                if length:
                    runs.append(code)
                    runs.append(length)
                    runs[count_at] += 1
                code = item_code
                length = 1
        runs.append(code)
        runs.append(length)
        runs[count_at] += 1
    try:
        message_column = array(ID_TYPECODE, messages).tobytes()
    except (OverflowError, TypeError):
        return encode(lists, message_columns=False)
    return (
        table,
        runs,
        array(ID_TYPECODE, roots).tobytes(),
        array(ID_TYPECODE, edges).tobytes(),
        values,
        multi,
        message_column,
        others,
    )


def decode(
    frame: Frame,
    known: dict[tuple[Any, ...], TupleSource],
    deliver: dict[int, Callable[[Any], None]],
) -> int:
    """Deliver a frame's items to local inboxes (``deliver``: task -> inbox append);
    return how many. ``known`` keeps one TupleSource per source across frames."""
    table, runs, b_roots, b_edges, values, multi, b_messages, others = frame
    sources: list[TupleSource] = []
    arities: list[int] = []
    for key in table:
        src = known.get(key)
        if src is None:
            component, stream, task, fields = key
            src = known[key] = TupleSource(component, stream, task, Fields(list(fields)))
        sources.append(src)
        arities.append(len(key[3]))
    roots = _ints(b_roots)
    edges = _ints(b_edges)
    messages = _ints(b_messages)
    _check(runs, arities, deliver, len(roots), len(edges), len(values), len(messages), others)
    t = 0  # next tuple (roots, edges, multi)
    v = 0  # next value
    m = 0  # next message int
    o = 0  # next other item
    delivered = 0
    h = 0
    end = len(runs)
    while h < end:
        put = deliver[runs[h]]
        n_runs = runs[h + 1]
        h += 2
        for _ in range(n_runs):
            code = runs[h]
            length = runs[h + 1]
            h += 2
            delivered += length
            if code == OTHERS:
                for k in range(o, o + length):
                    put(others[k])
                o += length
                continue
            if code < 0:
                width = -1 - code
                if width == 4:  # acker messages, the common case: no slice, no tuple()
                    for _ in range(length):
                        put((messages[m], messages[m + 1], messages[m + 2], messages[m + 3]))
                        m += 4
                else:
                    for _ in range(length):
                        put(tuple(messages[m : m + width]))
                        m += width
                continue
            src = sources[code]
            arity = arities[code]
            stop = t + length
            if multi:
                for k in range(t, stop):
                    put(Tuple(values[v : v + arity], src, roots[k], edges[k], multi.get(k)))
                    v += arity
            elif arity == 1:
                for k in range(t, stop):
                    put(Tuple([values[v]], src, roots[k], edges[k]))
                    v += 1
            else:
                for k in range(t, stop):
                    put(Tuple(values[v : v + arity], src, roots[k], edges[k]))
                    v += arity
            t = stop
    return delivered


def _check(
    runs: list[int],
    arities: list[int],
    deliver: dict[int, Callable[[Any], None]],
    n_roots: int,
    n_edges: int,
    n_values: int,
    n_messages: int,
    others: list[Any],
) -> None:
    """Refuse (ValueError, before anything is delivered) a frame whose runs claim more
    than its columns hold, or kinds and tasks it cannot have: a frame is delivered whole
    or not at all. One pass over the runs (a few per target task), not over the items.
    (Fuzzing found a run of messages over an empty column delivering empty tuples, as
    many as the run claimed.)"""
    tuples = values = ints = other = 0
    h, end = 0, len(runs)
    try:
        while h < end:
            task, n_runs = runs[h], runs[h + 1]
            h += 2
            if task not in deliver or n_runs < 0:
                raise ValueError(f"no task {task!r} here" if task not in deliver else "runs")
            for _ in range(n_runs):
                code, length = runs[h], runs[h + 1]
                h += 2
                if length < 0:
                    raise ValueError(f"a run of {length} items")
                if code == OTHERS:
                    other += length
                elif code < 0:
                    if -1 - code not in MESSAGE_WIDTHS:
                        raise ValueError(f"no message kind {code}")
                    ints += (-1 - code) * length
                elif code < len(arities):
                    tuples += length
                    values += arities[code] * length
                else:
                    raise ValueError(f"no source {code} in a table of {len(arities)}")
    except (IndexError, TypeError):
        raise ValueError("malformed frame: its runs end early or are not integers") from None
    if tuples > min(n_roots, n_edges) or values > n_values or ints > n_messages:
        raise ValueError(
            f"malformed frame: {tuples} tuples, {values} values and {ints} message ints "
            f"claimed, {min(n_roots, n_edges)}, {n_values} and {n_messages} held"
        )
    if other > len(others):
        raise ValueError(f"malformed frame: {other} items claimed, {len(others)} held")


def _ints(data: bytes) -> list[Any]:
    column = array(ID_TYPECODE)
    column.frombytes(data)
    return column.tolist()
