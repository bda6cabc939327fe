"""Fields and global groupings decide a tuple's task by its values alone, never by which
worker emits it: every emitting task builds its own routers, on its own worker, with
its own set of local tasks (runtime/routing.make_router), and a key that two of them
sent to different tasks would be split between two bolt tasks (a count kept in two
halves, a join that never meets). Single-worker clusters cannot show this; the routers
built for different local sets must agree."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.runtime.routing import make_router
from tupletree.topology.fields import Fields
from tupletree.topology.groupings import FIELDS, GLOBAL, Grouping

FIELDS_OF_STREAM = Fields(["key", "other"])

keys = st.one_of(
    st.text(max_size=6), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.none()
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 64), min_size=1, max_size=8, unique=True),
    st.lists(st.lists(st.booleans(), min_size=8, max_size=8), min_size=2, max_size=4),
    st.lists(st.tuples(keys, keys), min_size=1, max_size=20),
    st.sampled_from([["key"], ["key", "other"], None]),
)
def test_a_key_goes_to_the_same_task_from_every_worker(
    tasks: list[int], locality: list[list[bool]], rows: list[tuple[Any, Any]], on: Any
) -> None:
    """Each entry of ``locality`` is one emitting worker (which target tasks are local
    to it); ``on`` the grouping's fields (None: a global grouping). Every worker's router
    sends each row to one task, the same one."""
    grouping = Grouping(GLOBAL) if on is None else Grouping(FIELDS, on)
    routers = []
    for i, local in enumerate(locality):
        local_tasks = {t for t, here in zip(tasks, local, strict=False) if here}
        routers.append(
            make_router(
                grouping,
                list(tasks),
                FIELDS_OF_STREAM,
                None,
                "default",
                local_tasks,
                random.Random(i),
            )
        )
    for row in rows:
        chosen = [router.choose(list(row)) for router in routers]
        assert all(len(c) == 1 and c[0] in tasks for c in chosen), chosen
        assert len({c[0] for c in chosen}) == 1, (row, chosen)
