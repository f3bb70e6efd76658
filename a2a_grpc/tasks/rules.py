"""What a caller may do with a task, and the errors that say no."""

from __future__ import annotations

from a2a_grpc.call import CallContext
from a2a_grpc.errors import (
    InvalidRequestError,
    PushNotificationConfigNotFoundError,
    StorageUnavailableError,
    TaskChangedError,
    TaskHistoryFullError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import TERMINAL_STATES


def check_visible(task_id: str, owner: str, call: CallContext, shown: bool) -> None:
    """The one place that decides whether a caller may see a task: a task another caller owns, or one
    not shown yet, does not exist for them (never PERMISSION_DENIED, which would leak its existence)."""
    if owner != call.owner or not shown:
        raise not_found(task_id)


def check_resumable(task: a2a_pb2.Task, message: a2a_pb2.Message, *, busy: bool) -> None:
    """Whether a message may continue `task`; `busy`: a run works on it, here or on another replica."""
    if task.status.state in TERMINAL_STATES:
        raise UnsupportedOperationError(
            f"task {task.id} is in a terminal state and accepts no more messages", metadata={"taskId": task.id}
        )
    if message.context_id and message.context_id != task.context_id:
        raise InvalidRequestError(
            "message.context_id does not match the task's context",
            violations=[("message.context_id", f"task {task.id} belongs to context {task.context_id}")],
        )
    if busy:
        raise UnsupportedOperationError(
            f"task {task.id} is still processing an earlier message", metadata={"taskId": task.id}
        )


def history_full(task_id: str, limit: int, held: int, *, new_task: bool = False) -> TaskHistoryFullError:
    """The refusal of a message past a task's history bytes; for a `new_task` (never created), of a message
    larger than any task may hold."""
    if new_task:
        return TaskHistoryFullError(
            f"a task may hold at most {limit} bytes of history and this message alone takes {held}; send less",
            metadata={"limit": str(limit)},
        )
    return TaskHistoryFullError(
        f"task {task_id} may hold at most {limit} bytes of history and this message would make {held}; "
        "continue in a new task",
        metadata={"taskId": task_id, "limit": str(limit)},
    )


def stopped_message(message: a2a_pb2.Message) -> a2a_pb2.Message:
    message.parts.add(text="The server stopped while this task was running.")
    return message


def not_cancelable(task_id: str, state: int) -> TaskNotCancelableError:
    return TaskNotCancelableError(
        f"task {task_id} is already {a2a_pb2.TaskState.Name(state)}", metadata={"taskId": task_id}
    )


def not_found(task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(f"task {task_id} not found", metadata={"taskId": task_id})


def changed_meanwhile(task_id: str) -> TaskChangedError:
    return TaskChangedError(
        f"task {task_id} was changed by another request meanwhile; read it again and retry",
        metadata={"taskId": task_id},
    )


def storage_unavailable() -> StorageUnavailableError:
    return StorageUnavailableError("storage full, retry later")


def bad_page_token() -> InvalidRequestError:
    return InvalidRequestError("invalid page_token", violations=[("page_token", "is not a token this server issued")])


def config_not_found(task_id: str, config_id: str) -> PushNotificationConfigNotFoundError:
    return PushNotificationConfigNotFoundError(
        f"task {task_id} has no push notification config {config_id}",
        metadata={"taskId": task_id, "configId": config_id},
    )
