"""What one task may hold, whatever its callers send and its agent publishes."""

from __future__ import annotations

from dataclasses import dataclass

MAX_HISTORY_PER_TASK = 1000  # messages kept in a task's history; older ones are dropped, oldest first
MAX_ARTIFACT_BYTES_PER_TASK = 64 * 1024 * 1024  # bytes a task's artifacts may take
MAX_PUSH_CONFIGS_PER_TASK = 10  # push notification configs a task keeps; one more is RESOURCE_EXHAUSTED


@dataclass(frozen=True, slots=True)
class TaskLimits:
    max_history: int = MAX_HISTORY_PER_TASK
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES_PER_TASK
    max_push_configs: int = MAX_PUSH_CONFIGS_PER_TASK


DEFAULT_TASK_LIMITS = TaskLimits()
