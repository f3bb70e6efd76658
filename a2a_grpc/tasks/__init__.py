"""Tasks: the manager that owns them, and the live state of the ones being worked on or watched."""

from a2a_grpc.protocol import TERMINAL_STATES
from a2a_grpc.tasks.live import (
    SUBSCRIBER_BUFFER_BYTES,
    LiveTask,
    Subscriber,
    SubscriberOverflowError,
    now_timestamp,
    task_view,
    wait_durable,
)
from a2a_grpc.tasks.manager import TaskManager
from a2a_grpc.tasks.run import TaskRun

__all__ = [
    "SUBSCRIBER_BUFFER_BYTES",
    "TERMINAL_STATES",
    "LiveTask",
    "Subscriber",
    "SubscriberOverflowError",
    "TaskManager",
    "TaskRun",
    "now_timestamp",
    "task_view",
    "wait_durable",
]
