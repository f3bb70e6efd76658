"""Tasks: the manager that owns them, and the live state of the ones being worked on or watched."""

from a2a_grpc.protocol import TERMINAL_STATES
from a2a_grpc.tasks.limits import (
    MAX_ARTIFACT_BYTES_PER_TASK,
    MAX_HISTORY_BYTES_PER_TASK,
    MAX_HISTORY_PER_TASK,
    MAX_PUSH_CONFIGS_PER_TASK,
    TaskLimits,
)
from a2a_grpc.tasks.live import now_timestamp, task_view
from a2a_grpc.tasks.machine import TaskMachine
from a2a_grpc.tasks.manager import Subscription, TaskManager
from a2a_grpc.tasks.phase import Phase, TransitionError
from a2a_grpc.tasks.replicas import LEASE_SECONDS, POLL_SECONDS
from a2a_grpc.tasks.retention import EVENT_RETENTION_SECONDS
from a2a_grpc.tasks.run import TaskRun
from a2a_grpc.tasks.subscriber import SUBSCRIBER_BUFFER_BYTES, Subscriber, SubscriptionStoppedError, wait_durable

__all__ = [
    "EVENT_RETENTION_SECONDS",
    "LEASE_SECONDS",
    "MAX_ARTIFACT_BYTES_PER_TASK",
    "MAX_HISTORY_BYTES_PER_TASK",
    "MAX_HISTORY_PER_TASK",
    "MAX_PUSH_CONFIGS_PER_TASK",
    "POLL_SECONDS",
    "SUBSCRIBER_BUFFER_BYTES",
    "TERMINAL_STATES",
    "Phase",
    "Subscriber",
    "Subscription",
    "SubscriptionStoppedError",
    "TaskLimits",
    "TaskMachine",
    "TaskManager",
    "TaskRun",
    "TransitionError",
    "now_timestamp",
    "task_view",
    "wait_durable",
]
