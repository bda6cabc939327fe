"""Id generation and the spout pending map."""

from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.pending import SpoutPending


def test_ids_are_nonzero_64_bit_and_distinct():
    """Ids are never 0 (invisible to XOR), fit in 64 bits, and do not repeat."""
    gen = IdGenerator(1)
    ids = [gen.next_id() for _ in range(5000)]
    assert all(0 < i < 2**64 for i in ids)
    assert len(set(ids)) == len(ids)
    assert max(ids).bit_length() > 60  # really 64-bit, not small ints


def test_ids_reproducible_with_seed_and_differ_between_seeds():
    """A seed reproduces a sequence (tests); different seeds give different ones."""
    a, b, c = IdGenerator(7), IdGenerator(7), IdGenerator(8)
    seq_a = [a.next_id() for _ in range(3000)]  # crosses a bulk refill
    assert seq_a == [b.next_id() for _ in range(3000)]
    assert seq_a != [c.next_id() for _ in range(3000)]


def test_unseeded_ids_come_from_the_os_and_are_distinct_per_generator():
    """Unseeded generators (os.urandom) never share a sequence, e.g. after a fork."""
    a, b = IdGenerator(), IdGenerator()
    ids_a = [a.next_id() for _ in range(3000)]
    ids_b = [b.next_id() for _ in range(3000)]
    assert all(0 < i < 2**64 for i in ids_a + ids_b)
    assert len(set(ids_a) | set(ids_b)) == 6000


def test_zero_ids_are_dropped_and_the_hot_path_pop_sees_the_refill():
    """A drawn 0 would be invisible to XOR: it is dropped. Hot paths hold ``gen.pop``
    (the buffer's own pop), so the refill must keep the same buffer object."""
    gen = IdGenerator(1)
    # Every other 8-byte id is all zero bytes.
    gen._random_bytes = lambda n: (bytes(8) + b"\x01" * 8) * (n // 16)
    pop = gen.pop
    first = gen.next_id()
    rest = [pop() for _ in range(511)]
    assert {first, *rest} == {int.from_bytes(b"\x01" * 8, "little")}
    assert len(rest) == 511  # 1024 drawn, 512 zeros dropped, 512 served


def test_pending_settles_once():
    """A root is settled once; a later ack/fail for it finds nothing."""
    p = SpoutPending()
    p.add(5, "m", 1.0)
    assert len(p) == 1
    assert p.settle(5) == ("m", 1.0)
    assert p.settle(5) is None and len(p) == 0


def test_pending_times_out_after_two_rotations_and_reset_extends():
    """2 buckets: untouched expires on the 2nd rotation; reset restarts the countdown."""
    p = SpoutPending()
    p.add(1, "a", 0.0)
    p.add(2, "b", 0.5)
    assert p.rotate() == []
    assert p.reset(2) is True
    assert p.rotate() == [(1, "a", 0.0)]
    assert p.rotate() == [(2, "b", 0.5)]
    assert p.reset(2) is False
