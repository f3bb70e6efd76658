"""The memory store's ListTasks indexes: per owner, per (owner, context), per (owner, state) and per
(owner, context, state), the keys (status timestamp, task id) of the matching tasks in one sorted list.

A page is a slice of one list found by bisection, and a count is a list's length (under a timestamp bound,
its length from the bound on): neither looks at a task the page does not show. A task's keys move when its
state or status timestamp changes; updates land on the newest tasks, at the lists' ends, where moving a key
moves few others.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from a2a_grpc.store.base import TaskQuery

SortKey = tuple[int, str]  # (status timestamp in microseconds, task id): a page is newest first, id descending


@dataclass(frozen=True, slots=True)
class Listed:
    """What the listing knows of a task: the keys it is filed under and its place in their order."""

    owner: str
    context_id: str
    state: int
    key: SortKey


@dataclass(slots=True)
class ListingSlice:
    keys: list[SortKey]  # newest first
    total: int  # every task that matches the query, in the slice or not


class TaskListing:
    def __init__(self) -> None:
        self._lists: dict[tuple[str | int, ...], list[SortKey]] = {}

    def add(self, task: Listed) -> None:
        for name in _names(task):
            bisect.insort(self._lists.setdefault(name, []), task.key)

    def discard(self, task: Listed) -> None:
        """Forget the task: what a task leaving the store (or moving, before `add` files it anew) does."""
        for name in _names(task):
            keys = self._lists.get(name)
            if keys is None:
                continue
            at = bisect.bisect_left(keys, task.key)
            if at < len(keys) and keys[at] == task.key:
                del keys[at]
            if not keys:
                del self._lists[name]

    def after(self, query: TaskQuery, cursor: SortKey | None, limit: int) -> ListingSlice:
        """The keys of up to `limit` tasks that match the query, after `cursor` (from the newest without one)."""
        keys = self._lists.get(_query_name(query), [])
        low = 0 if query.status_after_us is None else bisect.bisect_left(keys, (query.status_after_us, ""))
        high = len(keys) if cursor is None else max(low, bisect.bisect_left(keys, cursor))
        return ListingSlice(keys[max(low, high - limit) : high][::-1], len(keys) - low)


def _names(task: Listed) -> tuple[tuple[str | int, ...], ...]:
    owner, context_id, state = task.owner, task.context_id, task.state
    return (owner,), (owner, context_id), (owner, state), (owner, context_id, state)


def _query_name(query: TaskQuery) -> tuple[str | int, ...]:
    if query.context_id and query.state:
        return query.owner, query.context_id, query.state
    if query.context_id:
        return query.owner, query.context_id
    if query.state:
        return query.owner, query.state
    return (query.owner,)
