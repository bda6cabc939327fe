"""Sealing data frames (distributed/sealing.py): a frame opens only with the key of the
receiver it was sealed for, carries its link's next number, and a receiver's guard
admits each number once, in order, whatever an attacker re-sends and in whatever order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed import sealing
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.sealing import (
    MAC_BYTES,
    Link,
    ReplayGuard,
    claimed_sender,
    link_key,
    open_frame,
)

KEY = data_key(new_secret())
A, B, C = "tcp://127.0.0.2:40001", "tcp://127.0.0.3:40002", "tcp://127.0.0.3:40003"
ID1, ID2 = b"\x01" * 8, b"\x02" * 8


def test_a_frame_opens_only_for_its_receiver_with_its_number_and_payload() -> None:
    link = Link(KEY, A, B, first_sequence=1_000, link_id=ID1)
    first, second = link.seal(b"one"), link.seal(b"two")
    assert open_frame(link_key(KEY, B), first) == (A, 1_001, b"one")
    assert open_frame(link_key(KEY, B), second) == (A, 1_002, b"two")
    assert open_frame(link_key(KEY, C), first) is None
    assert open_frame(link_key(data_key(new_secret()), B), first) is None
    assert len(first) == link.overhead + len(b"one")
    assert claimed_sender(first) == A and claimed_sender(b"x" * MAC_BYTES) == "(no sender)"


def test_a_receivers_cache_gives_each_link_its_own_sender_and_refuses_a_forged_tag() -> None:
    """With the cache the transport keeps, frames of two links open as their own senders'
    (a cached link's sender is remembered with its cipher), a bytes-like frame opens as
    bytes do, and a frame of a cached link whose tag was altered is still refused."""
    cache: dict[bytes, object] = {}
    key = link_key(KEY, B)
    from_a, from_c = Link(KEY, A, B, 10, ID1), Link(KEY, C, B, 20, ID2)
    for round_ in range(1, 3):
        assert open_frame(key, from_a.seal(b"a"), cache) == (A, 10 + round_, b"a")  # type: ignore[arg-type]
        assert open_frame(key, memoryview(from_c.seal(b"c")), cache) == (C, 20 + round_, b"c")  # type: ignore[arg-type]
    assert len(cache) == 2
    forged = bytearray(from_a.seal(b"a"))
    forged[0] ^= 1
    assert open_frame(key, bytes(forged), cache) is None  # type: ignore[arg-type]


def test_keys_over_64_bytes_and_odd_links_are_handled() -> None:
    long_key = bytes(range(100))
    frame = Link(long_key, A, B, 0, ID1).seal(b"")
    assert open_frame(link_key(long_key, B), frame) == (A, 1, b"")
    with pytest.raises(ValueError, match="first_sequence"):
        Link(KEY, A, B, -1, ID1)
    with pytest.raises(ValueError, match="link id is 8 bytes"):
        Link(KEY, A, B, 0, b"short")
    with pytest.raises(ValueError, match="65,535 bytes"):
        Link(KEY, "x" * 70_000, B, 0, ID1)
    with pytest.raises(ValueError, match="max_senders"):
        ReplayGuard(0)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**62),
    st.lists(st.integers(1, 3), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=40),
)
def test_each_frame_is_admitted_once_in_order_and_every_replay_refused(
    first: int, skips: list[int], replays: list[tuple[int, int]]
) -> None:
    """A link's frames arrive in order (ZeroMQ keeps one connection's order), some of
    them dropped on the way (a peer that went away); an attacker re-sends recorded
    ones, any of them, at any point after they passed. Every genuine frame that arrives
    is admitted, and no replay is."""
    link = Link(KEY, A, B, first, ID1)
    key = link_key(KEY, B)
    guard = ReplayGuard()
    recorded: list[bytes] = []
    admitted = refused = 0
    by_position: dict[int, list[int]] = {}
    for when, which in replays:
        by_position.setdefault(when, []).append(which)
    for position, skip in enumerate(skips):
        for _ in range(skip - 1):
            link.seal(b"dropped on the way")  # numbers may skip
        frame = link.seal(position.to_bytes(2, "big"))
        opened = open_frame(key, frame)
        assert opened is not None
        assert guard.admit(opened[0], opened[1]) is None, "a genuine frame was refused"
        admitted += 1
        recorded.append(frame)
        for which in by_position.get(position, []):
            replay = recorded[which % len(recorded)]
            sender, sequence, _ = open_frame(key, replay)  # type: ignore[misc]
            assert guard.admit(sender, sequence) is not None, "a replay was admitted"
            refused += 1
    assert admitted == len(skips)
    assert refused == sum(1 for when, _ in replays if when < len(skips))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), max_size=60), st.integers(1, 5))
def test_the_guard_holds_at_most_its_bound_and_forgets_the_least_recent(
    senders: list[str], bound: int
) -> None:
    guard = ReplayGuard(bound)
    number: dict[str, int] = {}
    recency: list[str] = []
    for sender in senders:
        number[sender] = number.get(sender, 0) + 1
        assert guard.admit(sender, number[sender]) is None
        if sender in recency:
            recency.remove(sender)
        recency.append(sender)
        assert len(guard) == min(bound, len(recency))
    # The most recent `bound` senders are remembered: their last frames are refused again.
    for sender in recency[-bound:]:
        assert guard.admit(sender, number[sender]) == number[sender]


def test_any_change_to_a_frame_header_or_payload_opens_nothing() -> None:
    """The header is not under the tag, but its sender and link id make the key and its
    number the nonce: a frame with any one byte changed, anywhere, is refused, and so
    is one with bytes cut or added."""
    frame = Link(KEY, A, B, 77, ID1).seal(b"payload bytes")
    key = link_key(KEY, B)
    assert open_frame(key, frame) == (A, 78, b"payload bytes")
    for i in range(len(frame)):
        changed = bytearray(frame)
        changed[i] ^= 0x01
        assert open_frame(key, bytes(changed)) is None, i
    assert open_frame(key, frame[:-1]) is None
    assert open_frame(key, frame + b"x") is None
    assert open_frame(key, frame[: MAC_BYTES + 2]) is None


def test_two_lives_of_a_sender_on_one_address_never_share_a_key() -> None:
    """A worker restarted on its old port, whose clock went back, numbers its frames as
    its earlier life did: its new link id gives them another key, so the same number
    never tags two payloads under one key (what Poly1305 must never do); each opens
    as its own."""
    old, new = Link(KEY, A, B, 500, ID1), Link(KEY, A, B, 500, ID2)
    a, b = old.seal(b"first life"), new.seal(b"second life")
    assert a[:MAC_BYTES] != b[:MAC_BYTES]
    key = link_key(KEY, B)
    assert open_frame(key, a) == (A, 501, b"first life")
    assert open_frame(key, b) == (A, 501, b"second life")
    # The tag of one life's frame does not carry over to the other's header.
    assert open_frame(key, b[:MAC_BYTES] + a[MAC_BYTES:]) is None


def test_the_receivers_cache_of_link_ciphers_is_bounded_and_strangers_stay_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A link's cipher is kept once a frame opened with it, at most MAX_OPENERS of them
    (then the cache starts over and frames go on opening); frames under another key,
    however many senders they claim, leave no entry."""
    monkeypatch.setattr(sealing, "MAX_OPENERS", 3)
    key = link_key(KEY, B)
    ciphers: dict[bytes, object] = {}
    stranger = data_key(new_secret())
    for i in range(10):
        forged = Link(stranger, f"tcp://127.0.0.9:{i}", B, 0, ID1).seal(b"x")
        assert open_frame(key, forged, ciphers) is None  # type: ignore[arg-type]
    assert ciphers == {}
    for i in range(10):
        link = Link(KEY, f"tcp://127.0.0.2:{40000 + i}", B, 0, ID1)
        assert open_frame(key, link.seal(b"x"), ciphers) is not None  # type: ignore[arg-type]
        assert 1 <= len(ciphers) <= 3
