"""What one task may hold, whatever its callers send and its agent publishes."""

from __future__ import annotations

from dataclasses import dataclass

from a2a_grpc.settings.defaults import MAX_ARTIFACT_BYTES_PER_TASK as MAX_ARTIFACT_BYTES_PER_TASK
from a2a_grpc.settings.defaults import MAX_HISTORY_PER_TASK as MAX_HISTORY_PER_TASK
from a2a_grpc.settings.defaults import MAX_PUSH_CONFIGS_PER_TASK as MAX_PUSH_CONFIGS_PER_TASK


@dataclass(frozen=True, slots=True)
class TaskLimits:
    max_history: int = MAX_HISTORY_PER_TASK
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES_PER_TASK
    max_push_configs: int = MAX_PUSH_CONFIGS_PER_TASK


DEFAULT_TASK_LIMITS = TaskLimits()
