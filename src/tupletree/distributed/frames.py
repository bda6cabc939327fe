"""Frames: how a batch of items bound for one peer worker is laid out on the wire.

A remote task's inbox is a plain list held by its peer's ``PeerBuffer``: an emit to a
task on another worker is one ``list.append``, as cheap as a local delivery. At each
flush the buffer becomes one frame: ``encode`` turns it into bytes, ``decode`` turns
those bytes back into items in the local inboxes. The transport signs the bytes and
checks them before ``decode`` reads anything (distributed/transport.py).

Decisions, each measured with callgrind (``bash bench/instructions_transport.sh``,
``bash bench/instructions_two.sh``; the figures are in notes/performance.md):

- A frame is columnar, not a list of per-item records. Per target task it holds runs of
  items of one kind, in the order they were appended: tuples from one source (a table
  of sources is sent once per frame), runtime messages (acker messages and replies to
  spouts: tuples of ids and small ints), or anything else. The order of items bound
  for one task is kept; items bound for different tasks may cross in another order, as
  Storm promises order only per pair of tasks (the acker accepts an ack before its
  init; nothing else orders across tasks).
- Integers travel as ``array`` bytes (8 bytes each, native byte order): the edges of
  tuples, and the runtime messages flattened into one column. Roots are run-length
  coded, ``(root, count)``: the tuples of one tree arrive in a row (a bolt's emits for
  one input), and the receiver then gives the whole run one ``int`` object, so the
  bolt that acks them finds the same object in a row (BoltExecutor.run_batch's
  identity check). Tuples in several trees (rare) carry their ``{root: edge}`` dict in
  a side table keyed by position.
- Values are one flat column for the whole frame (a tuple's values are as many as its
  source declares fields, which every emit checks, so the receiver slices them back),
  written by the cheapest of three codings that keeps every value exactly as it was:
  ``TEXT``: all are ``str`` (exactly, no subclass) without a NUL: joined with NULs,
  one UTF-8 encode, one decode and one split on the other side (surrogates pass);
  ``PLAIN``: all are exactly ``str``, ``int``, ``float``, ``bool``, ``None`` or
  ``bytes``: marshal, which rebuilds exactly these types; ``PICKLED``: anything else:
  the transport's pickle (with its cloudpickle fallback), as a blob of its own.
  marshal would also take a ``bytearray``, a ``memoryview`` or an ``array`` and hand
  back ``bytes``, and a ``list`` holding one: hence the exact types, checked per value.
- The frame itself (the source table, the runs, the columns) is marshalled (format
  version 2: no back-references to keep, since nothing repeats), never pickled: what a
  frame carries besides the values is ints, strings and bytes. Items that are not
  tuples or runtime messages go pickled, as one blob.
- A BatchBolt's emits to one task arrive as a ``Batch`` item (topology/batch.py): it
  joins the run of its source as its rows would, its columns copied whole. A task that
  takes Batches (``decode``'s ``batch_tasks``) gets each run of tuples as one Batch of
  slices of the frame's columns, so no Tuple is made on either side; any other task
  gets a Tuple per row, as always. A run that is the whole frame takes the values and
  edges columns themselves, and one that begins and ends with the frame's root runs
  takes their slices rather than a loop over them: with a BatchBolt's words alone in a
  frame, ~70 instructions a word less in ``decode`` (stop 43).
- Acks are not combined across tasks here. Every bolt already combines its own acks
  per tree per turn, and a BatchBolt per batch. Combining again per frame (stop 27:
  ``ACK(r, a)`` and ``ACK(r, b)`` sent as ``ACK(r, a ^ b)``) cost ~600 instructions
  per ack message for its dict. It merged 0.7% of them in the 2-worker word count and
  none with BatchBolts (notes/performance.md, "BatchBolt, 2026-11-28"): removed.

Bounds: a frame holds what one flush took (the transport splits a batch whose frame
would exceed its maximum size); decode makes no more items than the frame names.
"""

from __future__ import annotations

import marshal
import pickle
from array import array
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any, Final

from tupletree.reliability.protocol import ACK
from tupletree.topology.batch import Batch
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

# A frame is the marshalled tuple (source table, runs, run roots, run counts, edges,
# values coding, values column, multi-tree edges, runtime messages, other items).
# runs: for each target task, [task, number of runs, then (code, length) per run]: code
# >= 0 is a run of tuples from source ``table[code]``; -3 and -5 a run of runtime
# messages of width -code - 1 (tuples of ids and small ints, flattened into one column);
# ACK_RUN a run of plain acks (root and value in that column); OTHERS a run of other
# items (pickled together). Run roots and counts: the roots of the
# frame's tuples in order, run-length coded; edges: one per tuple; multi-tree edges:
# {tuple's position in the frame: {root: edge}}.

# How the values column is written (see the module's docstring).
# (Final: the compiled build then uses the numbers, not a module lookup per use.)
TEXT: Final = 0
PLAIN: Final = 1
PICKLED: Final = 2
MARSHAL_VERSION: Final = 2

# A run of roots is at most this long (its count is one byte); a longer one is split.
MAX_ROOT_RUN: Final = 255

OTHERS: Final = -1
_NO_RUN: Final = -2
# A run of plain acks, (ACK, root, value, 0): two ints each in the message column.
ACK_RUN: Final = -7
# Widths of the runtime's own messages: acker messages (kind, root, value, spout task)
# and replies to spouts (outcome, root); see reliability/protocol.py.
MESSAGE_WIDTHS: Final = (2, 4)

# Ids are unsigned 64-bit. array's "L" (C unsigned long) converts a Python int through
# a plain loop over its digits, while "Q" (unsigned long long) goes through CPython's
# generic byte-array conversion, several times slower per id (notes/performance.md).
# "L" is 8 bytes on 64-bit Linux and macOS; where it is not (Windows), "Q".
ID_TYPECODE: Final = "L" if array("L").itemsize == 8 else "Q"
_EMPTY_IDS: Final = array(ID_TYPECODE)


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


def _pickle(obj: Any) -> bytes:
    return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def encode(
    lists: dict[int, list[Any]],
    dumps: Callable[[Any], bytes] = _pickle,
    message_columns: bool = True,
) -> bytes:
    """The frame for the items in ``lists`` (task -> items), as bytes.

    ``dumps`` pickles what the frame cannot carry as plain data (values that are not
    plain, items that are neither tuples nor runtime messages); its errors propagate.
    Runtime messages (Python tuples of 2 or 4 non-negative 64-bit ints) go in one
    integer column; should a tuple of that width hold anything else, the frame is
    encoded again with ``message_columns`` off, every such tuple pickled as it is.

    Raises ValueError for a Tuple whose values do not match its source's fields (no
    collector emits one)."""
    index: dict[TupleSource, int] = {}
    table: list[tuple[Any, ...]] = []
    arities: list[int] = []
    runs: list[int] = []
    run_roots: list[Any] = []
    run_counts: list[int] = []
    edges: list[Any] = []
    values: list[Any] = []
    multi: dict[int, Any] = {}
    messages: list[Any] = []
    others: list[Any] = []
    text = True  # every value an exact str
    plain = True  # every value of a type marshal rebuilds exactly
    last_root: Any = None
    root_count = 0
    n_tuples = 0
    arity = 0
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
            count = 1  # the rows this item adds to its run
            if type(item) is Tuple:
                tup: Tuple = item
                src = tup._src
                if src is not last_src:
                    item_code = _source_code(src, index, table, arities)
                    last_src = src
                    arity = arities[item_code]
                else:
                    item_code = code
                if tup._roots is not None:
                    multi[n_tuples] = tup._roots
                n_tuples += 1
                # Identity only: a tree's tuples share their anchor's root object; an
                # equal root in another object just starts a run of its own.
                root = tup._root
                if root is last_root and root_count < MAX_ROOT_RUN:
                    root_count += 1
                else:
                    if root_count:
                        run_roots.append(last_root)
                        run_counts.append(root_count)
                    last_root = root
                    root_count = 1
                edges.append(tup._edge)
                vals = tup.values
                if len(vals) != arity:
                    raise ValueError(
                        f"tuple from {src.component!r} on stream {src.stream!r} has "
                        f"{len(vals)} value(s) for {arity} field(s)"
                    )
                for v in vals:
                    if type(v) is not str:
                        text = False
                        if plain and not _plain(v):
                            plain = False
                    values.append(v)
            elif type(item) is Batch:
                b: Batch = item
                count = len(b._edges)
                if not count:
                    continue
                src = b._src
                if src is not last_src:
                    item_code = _source_code(src, index, table, arities)
                    last_src = src
                    arity = arities[item_code]
                else:
                    item_code = code
                bvals = b._values
                if len(bvals) != count * arity:
                    raise ValueError(
                        f"batch from {src.component!r} on stream {src.stream!r} has "
                        f"{len(bvals)} value(s) for {count} row(s) of {arity} field(s)"
                    )
                if b._multi is not None:
                    for row, trees in b._multi.items():
                        multi[n_tuples + row] = trees
                n_tuples += count
                broots = b._roots
                bcounts = b._counts
                for j in range(len(broots)):
                    root = broots[j]
                    c = bcounts[j]
                    if root is last_root:
                        c += root_count
                    elif root_count:
                        run_roots.append(last_root)
                        run_counts.append(root_count)
                    while c > MAX_ROOT_RUN:
                        run_roots.append(root)
                        run_counts.append(MAX_ROOT_RUN)
                        c -= MAX_ROOT_RUN
                    last_root = root
                    root_count = c
                # ``+=``, not ``extend``: compiled, ``extend`` is PyList_SetSlice and
                # ``+=`` list_extend, ~50 instructions a call less (stop 43). (Filling
                # columns made at full length, item by item, cost more than either.)
                edges += b._edges
                if plain:  # once a value is neither, nothing is left to learn
                    for v in bvals:
                        if type(v) is not str:
                            text = False
                            if not _plain(v):
                                plain = False
                                break
                values += bvals
            elif message_columns and _message_width(item):
                msg: tuple[Any, ...] = item
                width = len(msg)
                last_src = None
                if _plain_ack(msg):
                    messages.append(msg[1])
                    messages.append(msg[2])
                    item_code = ACK_RUN
                else:
                    messages.extend(msg)
                    item_code = -1 - width
            else:
                others.append(item)
                item_code = OTHERS
                last_src = None
            if item_code == code:
                length += count
            else:
                if length:
                    runs.append(code)
                    runs.append(length)
                    runs[count_at] += 1
                code = item_code
                length = count
        if length:
            runs.append(code)
            runs.append(length)
            runs[count_at] += 1
    if root_count:
        run_roots.append(last_root)
        run_counts.append(root_count)
    try:
        message_column = _packed(messages)
    except (OverflowError, TypeError):
        return encode(lists, dumps, message_columns=False)
    kind = PLAIN
    column: Any = values
    if values:
        if text:
            joined = "\x00".join(values)
            if joined.count("\x00") == len(values) - 1:
                kind = TEXT
                column = joined.encode("utf-8", "surrogatepass")
            # else a value holds a NUL, which the split would not give back: PLAIN
        elif not plain:
            kind = PICKLED
            column = dumps(values)
    return marshal.dumps(
        (
            table,
            runs,
            _packed(run_roots),
            bytes(run_counts),
            _packed(edges),
            kind,
            column,
            multi,
            message_column,
            dumps(others) if others else b"",
        ),
        MARSHAL_VERSION,
    )


def decode(
    data: Any,
    known: dict[tuple[Any, ...], TupleSource],
    deliver: dict[int, Callable[[list[Any]], None]],
    loads: Callable[[Any], Any] = pickle.loads,
    batch_tasks: AbstractSet[int] | None = None,
) -> int:
    """Deliver a frame's items to local inboxes (``deliver``: task -> the inbox's
    ``extend``); return how many. ``known`` keeps one TupleSource per source across
    frames. A task in ``batch_tasks`` (a BatchBolt's) gets each run of tuples as one
    Batch, made of slices of the frame's columns, rather than one Tuple per item.
    ``data`` must be authenticated before it gets here: marshal and ``loads``
    (pickle's, by default) trust what they read.

    A frame is delivered whole or not at all: its runs are built first and handed over
    only once every column was used up exactly (a frame whose runs and columns
    disagree, a peer's bug or a version skew, raises ValueError and delivers nothing,
    and no tuple gets fewer values than its source's fields)."""
    frame = marshal.loads(data)
    table: list[Any] = frame[0]
    runs: list[int] = frame[1]
    kind: int = frame[5]
    column: Any = frame[6]
    multi: dict[int, Any] = frame[7]
    b_others: bytes = frame[9]
    values: list[Any]
    if kind == TEXT:
        values = column.decode("utf-8", "surrogatepass").split("\x00")
    elif kind == PLAIN:
        values = column
    else:
        values = loads(column)
    others: list[Any] = loads(b_others) if b_others else []
    sources: list[TupleSource] = []
    arities: list[int] = []
    for key in table:
        src = known.get(key)
        if src is None:
            component, stream, task, fields = key
            src = known[key] = TupleSource(component, stream, task, Fields(list(fields)))
        sources.append(src)
        arities.append(len(key[3]))
    run_roots = _ints(frame[2])
    run_counts: bytes = frame[3]
    edges = _ints(frame[4])
    messages = _ints(frame[8])
    has_multi = len(multi) > 0
    r = 0  # next root run
    root: Any = 0
    root_left = 0  # tuples left in the current root run
    t = 0  # next tuple (edges, multi)
    v = 0  # next value
    m = 0  # next message int
    o = 0  # next other item
    delivered = 0
    ready: list[tuple[Callable[[list[Any]], None], list[Any]]] = []
    h = 0
    end = len(runs)
    while h < end:
        put = deliver[runs[h]]
        as_batch = batch_tasks is not None and runs[h] in batch_tasks
        n_runs = runs[h + 1]
        h += 2
        for _ in range(n_runs):
            code = runs[h]
            length = runs[h + 1]
            h += 2
            delivered += length
            if code == OTHERS:
                ready.append((put, others[o : o + length]))
                o += length
                continue
            batch: list[Any] = []
            if code == ACK_RUN:
                for _ in range(length):
                    batch.append((ACK, messages[m], messages[m + 1], 0))
                    m += 2
                ready.append((put, batch))
                continue
            if code < 0:
                width = -1 - code
                if width == 4:  # acker messages, the common case: no slice, no tuple()
                    for _ in range(length):
                        batch.append(
                            (messages[m], messages[m + 1], messages[m + 2], messages[m + 3])
                        )
                        m += 4
                else:
                    for _ in range(length):
                        batch.append(tuple(messages[m : m + width]))
                        m += width
                ready.append((put, batch))
                continue
            src = sources[code]
            arity = arities[code]
            stop = t + length
            if as_batch:
                b_roots: list[Any]
                b_counts: list[int]
                left = length
                j = r
                if not root_left:  # the run starts a root run: does it end one too?
                    while left and j < len(run_counts) and run_counts[j] <= left:
                        left -= run_counts[j]
                        j += 1
                if not left:  # whole root runs: their columns' slices, not a loop
                    b_roots = run_roots if r == 0 and j == len(run_roots) else run_roots[r:j]
                    b_counts = list(run_counts[r:j])
                    r = j
                else:
                    b_roots = []
                    b_counts = []
                    left = length
                while left:
                    if not root_left:
                        root = run_roots[r]
                        root_left = run_counts[r]
                        r += 1
                    take = root_left if root_left < left else left
                    if b_roots and b_roots[-1] is root:
                        b_counts[-1] += take
                    else:
                        b_roots.append(root)
                        b_counts.append(take)
                    root_left -= take
                    left -= take
                b_multi: dict[int, Any] | None = None
                if has_multi:
                    for k in range(t, stop):
                        if k in multi:
                            if b_multi is None:
                                b_multi = {}
                            b_multi[k - t] = multi[k]
                # A run that is the whole frame (a BatchBolt's emits to one task) takes
                # the columns themselves, not copies: decode made them and keeps none
                # (an empty one is copied: no two Batches share a list).
                n_vals = length * arity
                whole = n_vals == len(values) and v == 0 and n_vals > 0
                b_vals = values if whole else values[v : v + n_vals]
                b_edges = edges if t == 0 and stop == len(edges) and stop > 0 else edges[t:stop]
                batch.append(Batch(src, b_vals, b_roots, b_counts, b_edges, b_multi))
                v += n_vals
                ready.append((put, batch))
                t = stop
                continue
            for k in range(t, stop):
                if not root_left:
                    root = run_roots[r]
                    root_left = run_counts[r]
                    r += 1
                root_left -= 1
                if arity == 1:
                    vals = [values[v]]
                else:
                    vals = values[v : v + arity]
                v += arity
                if has_multi and k in multi:
                    batch.append(Tuple(vals, src, 0, 0, multi[k]))
                else:
                    batch.append(Tuple(vals, src, root, edges[k]))
            ready.append((put, batch))
            t = stop
    if (
        v != len(values)
        or m != len(messages)
        or t != len(edges)
        or r != len(run_roots)
        or root_left
        or o != len(others)
    ):
        raise ValueError(
            f"frame inconsistent with its runs: values {v}/{len(values)}, messages "
            f"{m}/{len(messages)}, tuples {t}/{len(edges)}, root runs {r}/{len(run_roots)}, "
            f"others {o}/{len(others)}"
        )
    for put, batch in ready:
        put(batch)
    return delivered


def _source_code(
    src: TupleSource,
    index: dict[TupleSource, int],
    table: list[tuple[Any, ...]],
    arities: list[int],
) -> int:
    """``src``'s position in the frame's source table, adding it on first sight."""
    i = index.get(src)
    if i is None:
        i = index[src] = len(table)
        # The names' own tuple: ``tuple(src.fields)`` iterates Fields in interpreted code,
        # ~3k instructions per source per frame (notes/performance.md, stop 41).
        names: tuple[str, ...] = src.fields._names
        table.append((src.component, src.stream, src.task, names))
        arities.append(len(names))
    return i


def _plain_ack(msg: tuple[Any, ...]) -> bool:
    """True for ``(ACK, root, value, 0)`` with int ids, the acks of ACK_RUN. A function
    of its own for the compiled build: checked inline, ``type(msg[1]) is int`` narrows
    ``msg[1]`` to ``int``, and mypyc then unboxes each id and boxes it again to append
    it (~230 instructions an ack, notes/performance.md, stop 41)."""
    return (
        len(msg) == 4
        and type(msg[0]) is int
        and type(msg[3]) is int
        and msg[0] == ACK
        and msg[3] == 0
        and type(msg[1]) is int
        and type(msg[2]) is int
    )


def _message_width(item: Any) -> bool:
    """True for a tuple as wide as a runtime message (whether it holds one is checked
    when the column is made)."""
    return type(item) is tuple and (len(item) == 4 or len(item) == 2)


def _plain(v: Any) -> bool:
    """True for a value marshal rebuilds as it was (its exact type, not a subclass)."""
    t = type(v)
    return t is int or t is float or t is bool or v is None or t is bytes or t is str


def _packed(ints: list[Any]) -> bytes:
    """``ints`` as 8-byte unsigned ids. ``fromlist`` sizes the array once; the
    constructor grows it item by item (26 instructions more per id, measured). The
    empty array is copied, not made: ``array()`` parses its arguments first."""
    if not ints:  # most frames leave a column or two empty: ~1k instructions each
        return b""
    column = _EMPTY_IDS.__copy__()
    column.fromlist(ints)
    return column.tobytes()


def _ints(data: bytes) -> list[Any]:
    if not data:
        return []
    return array(ID_TYPECODE, data).tolist()


def values_coding(data: Any) -> int:
    """How a frame's values column is written (TEXT, PLAIN or PICKLED): for tests and
    diagnostics. Like decode, only for authenticated bytes."""
    coding: int = marshal.loads(data)[5]
    return coding
