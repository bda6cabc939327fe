"""Fuzzing the control envelope decoders (distributed/control.py ``decode_envelope``,
``decode_command``) with hypothesis: whatever arrives on the control socket, the
decoders return a message of the protocol with the types it promises or raise BadFrame,
and never unpickle a frame that is not signed with the topology's secret. Bounded: a few
hundred examples, about a second."""

from __future__ import annotations

import dataclasses
import pickle
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed import control
from tupletree.distributed.control import (
    FROM_WORKER,
    TO_WORKER,
    BadFrame,
    Envelope,
    decode_command,
    decode_envelope,
    encode,
    new_secret,
)

SECRET = new_secret()
UNPICKLED: list[str] = []


class _Tripwire:
    """Records being unpickled: an unsigned frame must never get that far."""

    def __reduce__(self) -> Any:
        return (UNPICKLED.append, ("unpickled",))


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


def _hinted(hint: Any) -> st.SearchStrategy[Any]:
    """Values of a field's type hint: ``Any`` as plain data (hypothesis has no ``Any``),
    dataclasses and TypedDicts field by field, unions of each member."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return plain
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_hinted(a) for a in args])
    if origin is dict:
        return st.dictionaries(_hinted(args[0]), _hinted(args[1]), max_size=3)
    if origin in (list, tuple) and args:
        return st.lists(_hinted(args[0]), max_size=3)
    if dataclasses.is_dataclass(hint):
        return _message(hint)
    if typing.is_typeddict(hint):
        hints = typing.get_type_hints(hint)
        return st.fixed_dictionaries({}, optional={k: _hinted(v) for k, v in hints.items()})
    return st.from_type(hint)


@st.composite
def _message(draw: Any, cls: type) -> Any:
    """A message (or record) of the protocol, its fields drawn from their type hints; one
    its own checks refuse (a record kind out of its list) is drawn as plain data."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: draw(_hinted(hints[f.name])) for f in dataclasses.fields(cls)}
    try:
        return cls(**fields)
    except (ValueError, TypeError):
        return draw(plain)


messages = st.one_of([_message(cls) for cls in (*FROM_WORKER, *TO_WORKER)])
objects = st.one_of(
    plain,
    messages,
    st.builds(Envelope, plain, plain, st.one_of(messages, plain), st.booleans()),
    st.builds(Envelope, st.integers(), st.integers(), messages, st.booleans()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=4))
def test_unsigned_frames_are_refused_before_anything_is_read(frames):
    """Random frames, and frames carrying a pickle with no (or a wrong) signature:
    BadFrame, and nothing unpickled."""
    for decode in (decode_envelope, decode_command):
        with pytest.raises(BadFrame):
            decode(SECRET, frames)
    tripwire = pickle.dumps(_Tripwire())
    for bad in ([b"", tripwire], [b"x" * 32, tripwire], [*frames[:1], tripwire]):
        with pytest.raises(BadFrame):
            decode_envelope(SECRET, bad)
    forged = encode(new_secret(), Envelope(1, 1, control.Heartbeat()))  # another topology's
    with pytest.raises(BadFrame, match="bad signature"):
        decode_envelope(SECRET, forged)
    assert UNPICKLED == []


@settings(max_examples=300, deadline=None)
@given(objects)
def test_signed_frames_decode_to_the_protocol_or_bad_frame(obj):
    """A signed frame holding anything: an envelope with int worker and attempt and a
    worker's message, a driver's message, or BadFrame; never another exception."""
    frames = [control.hmac.digest(SECRET, p := pickle.dumps(obj), "sha256"), p]
    try:
        env = decode_envelope(SECRET, frames)
    except BadFrame:
        pass
    else:
        assert type(env.worker) is int and type(env.attempt) is int
        assert isinstance(env.message, FROM_WORKER)
    try:
        command = decode_command(SECRET, frames)
    except BadFrame:
        pass
    else:
        assert isinstance(command, TO_WORKER)


def test_a_signed_frame_that_cannot_be_unpickled_is_bad_frame():
    payload = b"\x80\x05not a pickle"
    frames = [control.hmac.digest(SECRET, payload, "sha256"), payload]
    with pytest.raises(BadFrame, match="cannot unpickle"):
        decode_envelope(SECRET, frames)
