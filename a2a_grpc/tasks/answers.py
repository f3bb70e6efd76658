"""Answers that show a task, bounded before they are built.

upb's `ByteSize()` serializes what it measures: on a whole task it would build the very answer it is asked to
bound. Here the status, each message and each artifact are measured apart (one of them copied at a time), and
an answer's size is their sum with the most bytes that can frame each field (a few microseconds for an
ordinary task, about three times its own ByteSize). GetTask refuses an answer past its bound
(`check_answer`), naming the `history_length` that fits, so the caller's `history_length` is never cut
further than asked; a ListTasks page ends before a task that would take it past its bound, and a task too
large for a page of its own is listed alone and trimmed (`fitted_view`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from a2a_grpc.errors import AnswerTooLargeError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import page_token_after
from a2a_grpc.store.base import TaskPage
from a2a_grpc.tasks.live import task_view

# The most bytes that frame a field of a Task: a one-byte tag (fields 1 to 15) and a length under 4 GiB.
_FRAME_BYTES = 6
# A listed task its store says is this small is measured whole, by the ByteSize of its view (exact, and three
# times as fast as measuring it a part at a time): the copy that makes is as small.
SMALL_TASK_BYTES = 64 * 1024
Sized = TypeVar("Sized", a2a_pb2.Message, a2a_pb2.Artifact)
_MESSAGE_BYTES: Callable[[a2a_pb2.Message], int] = a2a_pb2.Message.ByteSize
_ARTIFACT_BYTES: Callable[[a2a_pb2.Artifact], int] = a2a_pb2.Artifact.ByteSize


def answer_bytes(task: a2a_pb2.Task, history_length: int | None, include_artifacts: bool = True) -> int:
    """The size of `task_view(task, history_length, include_artifacts)`, without building it."""
    size = _base_bytes(task) + _list_bytes(_shown_history(task, history_length), _MESSAGE_BYTES)
    return size + _list_bytes(task.artifacts, _ARTIFACT_BYTES) if include_artifacts else size


def check_answer(task: a2a_pb2.Task, history_length: int | None, limit: int) -> None:
    """Refuse a task whose answer would take more than `limit` bytes, saying how much history fits."""
    size = answer_bytes(task, history_length)
    if size <= limit:
        return
    room = limit - answer_bytes(task, 0)
    fits = _newest_fitting(_shown_history(task, history_length), room)[0] if room >= 0 else 0
    advice = (
        f"ask for at most {fits} of its newest messages with history_length"
        if room >= 0
        else "its status and artifacts alone pass it"
    )
    raise AnswerTooLargeError(
        f"task {task.id} would make an answer of {size} bytes, more than the {limit} this server sends; {advice}",
        metadata={"taskId": task.id, "limit": str(limit), "historyLengthThatFits": str(fits)},
    )


def bounded_page(page: TaskPage, history_length: int | None, include_artifacts: bool, max_bytes: int) -> TaskPage:
    """A store's page of tasks as ListTasks shows them, within `max_bytes`: it ends early, with a token for the
    next page, before a task that would pass them; a task that passes them alone comes alone, trimmed."""
    shown = TaskPage(next_page_token=page.next_page_token, total_size=page.total_size)
    size = 0
    for index, task in enumerate(page.tasks):
        view = None
        if index < len(page.sizes) and page.sizes[index] <= SMALL_TASK_BYTES:
            view = task_view(task, history_length, include_artifacts)
            size += view.ByteSize()
        else:
            size += answer_bytes(task, history_length, include_artifacts)
        if size <= max_bytes:
            shown.tasks.append(view if view is not None else task_view(task, history_length, include_artifacts))
            continue
        if not shown.tasks:  # the page's first task
            shown.tasks.append(fitted_view(task, history_length, include_artifacts, max_bytes))
            if index == len(page.tasks) - 1:
                break  # the store's token follows it already
        shown.next_page_token = page_token_after(shown.tasks[-1])
        break
    return shown


def fitted_view(task: a2a_pb2.Task, history_length: int | None, include_artifacts: bool, room: int) -> a2a_pb2.Task:
    """The task within `room` bytes, as far as it goes: its status (without the status message if that alone
    does not fit), then as many of its newest messages as fit, then its artifacts if they all fit."""
    view = a2a_pb2.Task(id=task.id, context_id=task.context_id, status=task.status)
    if task.HasField("metadata"):
        view.metadata.CopyFrom(task.metadata)
    if _base_bytes(view) > room:
        view.status.ClearField("message")
    room -= _base_bytes(view)
    history = _shown_history(task, history_length)
    kept, taken = _newest_fitting(history, room)
    view.history.extend(history[len(history) - kept :])
    room -= taken
    if include_artifacts and _list_bytes(task.artifacts, _ARTIFACT_BYTES) <= room:
        view.artifacts.extend(task.artifacts)
    return view


def _shown_history(task: a2a_pb2.Task, history_length: int | None) -> Sequence[a2a_pb2.Message]:
    if history_length is None:
        return task.history
    return task.history[-history_length:] if history_length > 0 else ()


def _newest_fitting(messages: Sequence[a2a_pb2.Message], room: int) -> tuple[int, int]:
    """How many of the newest `messages` fit in `room` bytes, and the bytes they take."""
    count = taken = 0
    for message in reversed(messages):
        size = message.ByteSize() + _FRAME_BYTES
        if taken + size > room:
            break
        count, taken = count + 1, taken + size
    return count, taken


def _base_bytes(task: a2a_pb2.Task) -> int:
    """The task without its history and artifacts."""
    size = len(task.id.encode()) + len(task.context_id.encode()) + task.status.ByteSize() + 3 * _FRAME_BYTES
    return size + task.metadata.ByteSize() + _FRAME_BYTES if task.HasField("metadata") else size


def _list_bytes(items: Sequence[Sized], size_of: Callable[[Sized], int]) -> int:
    return sum(map(size_of, items)) + _FRAME_BYTES * len(items)
