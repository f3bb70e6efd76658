"""Generated ids: 32 hex digits, never repeated, and never shared with a forked child process."""

from __future__ import annotations

import multiprocessing
import re

from a2a_grpc import ids
from a2a_grpc.ids import new_id


def test_ids_are_128_bit_hex_and_never_repeat() -> None:
    ids = [new_id() for _ in range(5000)]  # several batches
    assert all(re.fullmatch(r"[0-9a-f]{32}", value) for value in ids)
    assert len(set(ids)) == len(ids)


def _child_ids(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([new_id() for _ in range(10)])


def test_a_forked_child_never_hands_out_its_parents_next_ids() -> None:
    ids._unused.clear()
    new_id()  # a fresh batch, whatever earlier tests drew from the last one
    assert len(ids._unused) >= 10  # the parent holds ids it has not handed out yet
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    child = context.Process(target=_child_ids, args=(queue,))
    child.start()
    from_child = queue.get(timeout=30)
    child.join(timeout=30)
    from_parent = [new_id() for _ in range(10)]
    assert not set(from_child) & set(from_parent)
