"""The reference documents' worked examples, step by step against the real code."""

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.anchoring import ack_values, anchor_child
from tupletree.reliability.protocol import ACKED

from .strategies import model_tuple

ROOT = 0xABC


def test_reference_001_chain_spout_a_b():
    """Spout -> A -> B: values 100, 100^200, 200, 0 (FsShelter's worked table for a chain)."""
    ledger = AckerLedger()
    # Track + Anchor(aid, 100): the spout's init carries the edge it sent to A.
    assert ledger.init(ROOT, 100, spout_task=1) is None
    assert ledger.value(ROOT) == 100
    assert ledger.ack(ROOT, 200) is None  # Anchor(aid, 200): A emits to B
    assert ledger.value(ROOT) == 100 ^ 200
    assert ledger.ack(ROOT, 100) is None  # Ok(aid, 100): A done
    assert ledger.value(ROOT) == 200
    assert ledger.ack(ROOT, 200) == (ACKED, ROOT, 1)  # Ok(aid, 200): B done


def test_reference_001_fan_out():
    """Spout -> A -> (B, C): 100, 100^200, 100^200^300, 200^300, 300, 0."""
    ledger = AckerLedger()
    ledger.init(ROOT, 100, spout_task=1)
    seen = [ledger.value(ROOT)]
    for step in (200, 300, 100, 200):
        assert ledger.ack(ROOT, step) is None
        seen.append(ledger.value(ROOT))
    assert seen == [100, 100 ^ 200, 100 ^ 200 ^ 300, 200 ^ 300, 300]
    assert ledger.ack(ROOT, 300) == (ACKED, ROOT, 1)


def test_fan_out_with_storms_combined_messages():
    """The same fan-out through anchor_child/ack_values: A's ack carries 100^200^300."""
    ids = iter([200, 300])
    a = model_tuple("A", {ROOT: 100})
    b = model_tuple("B", anchor_child([a], lambda: next(ids)))
    c = model_tuple("C", anchor_child([a], lambda: next(ids)))
    assert b._tree_edges() == {ROOT: 200} and c._tree_edges() == {ROOT: 300}
    assert ack_values(a) == [(ROOT, 100 ^ 200 ^ 300)]
    ledger = AckerLedger()
    ledger.init(ROOT, 100, spout_task=1)
    ledger.ack(ROOT, 100 ^ 200 ^ 300)
    assert ledger.value(ROOT) == 200 ^ 300
    assert ledger.ack(*ack_values(b)[0]) is None
    assert ledger.ack(*ack_values(c)[0]) == (ACKED, ROOT, 1)


def test_reference_002_multi_anchoring_across_two_ackers():
    """Two spout tuples tracked by two ackers: tid1 anchored to stid1 (acker 1) and
    stid2 (acker 2), 4-bit ids."""
    stid1, stid2, tid1 = 0b1010, 0b1011, 0b1100
    root1, root2 = 2, 3  # root % 2 picks the acker: root1 -> acker 0, root2 -> acker 1
    ackers = [AckerLedger(), AckerLedger()]
    ackers[root1 % 2].init(root1, stid1, spout_task=1)
    ackers[root2 % 2].init(root2, stid2, spout_task=2)
    s1 = model_tuple("stid1", {root1: stid1})
    s2 = model_tuple("stid2", {root2: stid2})
    # Bolt1 emits tid1 anchored to both: one edge id per anchor (Storm draws one each);
    # drawing the same value twice here reproduces the page's single tid1.
    ids = iter([tid1, tid1])
    child = model_tuple("tid1", anchor_child([s1, s2], lambda: next(ids)))
    assert child._tree_edges() == {root1: tid1, root2: tid1}
    # "Acker1 ... 1010 XOR 1100 = 0110": the emit's anchor updates, sent separately here
    ackers[0].ack(root1, tid1)
    ackers[1].ack(root2, tid1)
    assert ackers[0].value(root1) == 0b0110 and ackers[1].value(root2) == 0b0111
    # Bolt1 acks both inputs: its own edge only (the child was already sent above)
    ackers[0].ack(root1, stid1)
    ackers[1].ack(root2, stid2)
    assert ackers[0].value(root1) == 0b1100 and ackers[1].value(root2) == 0b1100
    # Bolt2 acks tid1: both trees reach 0000 and both spouts hear ack
    outs = [ackers[r % 2].ack(r, v) for r, v in ack_values(child)]
    assert outs == [(ACKED, root1, 1), (ACKED, root2, 2)]


def test_duplicate_anchor_completes():
    """Anchoring to [t, t] draws two edges that cancel correctly."""
    ids = iter([7, 9])
    t = model_tuple("t", {ROOT: 5})
    child = model_tuple("c", anchor_child([t, t], lambda: next(ids)))
    assert child._tree_edges() == {ROOT: 7 ^ 9}
    ledger = AckerLedger()
    ledger.init(ROOT, 5, spout_task=1)
    (r, v) = ack_values(t)[0]
    assert ledger.ack(r, v) is None
    assert ledger.ack(*ack_values(child)[0]) == (ACKED, ROOT, 1)


def test_untracked_anchors_are_skipped_not_the_end_of_the_list():
    """Anchors [untracked, tracked]: the child joins the tracked anchor's tree and only
    the tracked anchor draws an edge (found by mutation testing: ``continue`` -> ``break``
    went unnoticed)."""
    untracked = model_tuple("u", None)
    tracked = model_tuple("t", {ROOT: 5})
    ids = iter([7])
    assert anchor_child([untracked, tracked], lambda: next(ids)) == {ROOT: 7}
    assert tracked._ack_val == 7 and untracked._ack_val == 0
    assert anchor_child([untracked], lambda: next(ids)) is None
