"""Every kind of spout Trident takes, behind one adapter shape (what the coordinator and
the spout's bolt call):

- ``spout_type``: its SpoutType (interfaces.py);
- ``output_fields()``: the field names it emits;
- ``get_coordinator(tx_id, conf, context)``: a BatchCoordinator, run in the master
  coordinator (``initialize_transaction``, ``is_ready``, ``success``, ``close``);
- ``make_emitter(tx_id, conf, context, progress)``: the emitter, run in each of the
  spout's bolt tasks (``emit_batch``, ``success``, ``close``; ``commit`` for a committer
  spout), with the progress store for the partitions' metadata.

``adapt(spout)`` picks the adapter by the spout's class (or its methods).
"""

from __future__ import annotations

from typing import Any

from tupletree.topology.components import Spout
from tupletree.topology.fields import Fields
from tupletree.trident.spout.interfaces import (
    IBatchSpout,
    IOpaquePartitionedTridentSpout,
    IPartitionedTridentSpout,
    ITridentSpout,
    SpoutType,
)


def fields_of(spout: Any, what: str) -> list[str]:
    get = getattr(spout, "get_output_fields", None)
    if not callable(get):
        raise TypeError(f"{what}: {type(spout).__name__} has no get_output_fields()")
    fields = get()
    if isinstance(fields, str):
        raise TypeError(
            f"{what}: get_output_fields() returned the string {fields!r}; return Fields({fields!r})"
        )
    return list(Fields(list(fields)))


class TridentSpoutAdapter:
    """A user's own ITridentSpout: its coordinator and emitter as they are."""

    def __init__(self, spout: Any) -> None:
        self.spout = spout
        self.spout_type = getattr(spout, "spout_type", SpoutType.NON_TRANSACTIONAL)

    def output_fields(self) -> list[str]:
        return fields_of(self.spout, "spout")

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return self.spout.get_coordinator(tx_id, conf, context)

    def make_emitter(self, tx_id: str, conf: dict[str, Any], context: Any, progress: Any) -> Any:
        return self.spout.get_emitter(tx_id, conf, context)


def adapt(spout: Any) -> Any:
    """The adapter for ``spout``; TypeError naming what it is when it is no spout."""
    from tupletree.trident.spout.batch_executor import BatchSpoutExecutor
    from tupletree.trident.spout.opaque import OpaquePartitionedExecutor
    from tupletree.trident.spout.partitioned import PartitionedExecutor
    from tupletree.trident.spout.rich import RichSpoutBatchExecutor

    if isinstance(spout, IPartitionedTridentSpout):
        return PartitionedExecutor(spout)
    if isinstance(spout, IOpaquePartitionedTridentSpout):
        return OpaquePartitionedExecutor(spout)
    if isinstance(spout, IBatchSpout):
        return BatchSpoutExecutor(spout)
    if isinstance(spout, ITridentSpout):
        return TridentSpoutAdapter(spout)
    if isinstance(spout, Spout):
        return RichSpoutBatchExecutor(spout)
    has = lambda m: callable(getattr(spout, m, None))  # noqa: E731
    if has("emit_batch") and has("get_output_fields"):
        return BatchSpoutExecutor(spout)
    if has("get_coordinator") and has("get_emitter"):
        return TridentSpoutAdapter(spout)
    raise TypeError(
        f"new_stream takes an IBatchSpout, ITridentSpout, IPartitionedTridentSpout, "
        f"IOpaquePartitionedTridentSpout or a plain Spout; got {type(spout).__name__}"
    )
