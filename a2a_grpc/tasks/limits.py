"""What one task may hold, whatever its callers send and its agent publishes, and the largest answer such a
task makes."""

from __future__ import annotations

from dataclasses import dataclass

from a2a_grpc.settings.defaults import MAX_ARTIFACT_BYTES_PER_TASK as MAX_ARTIFACT_BYTES_PER_TASK
from a2a_grpc.settings.defaults import MAX_HISTORY_BYTES_PER_TASK as MAX_HISTORY_BYTES_PER_TASK
from a2a_grpc.settings.defaults import MAX_HISTORY_PER_TASK as MAX_HISTORY_PER_TASK
from a2a_grpc.settings.defaults import MAX_PUSH_CONFIGS_PER_TASK as MAX_PUSH_CONFIGS_PER_TASK

# What a task's answer holds beside its history, status message and artifacts: ids, status, metadata and
# the encoding's own bytes (a few per message or part).
ANSWER_OVERHEAD_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class TaskLimits:
    max_history: int = MAX_HISTORY_PER_TASK
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES_PER_TASK
    max_push_configs: int = MAX_PUSH_CONFIGS_PER_TASK
    max_history_bytes: int = MAX_HISTORY_BYTES_PER_TASK

    @property
    def max_answer_bytes(self) -> int:
        """The largest answer a task within these limits makes: its history, its status message (the newest
        message once more), its artifacts and the rest; GetTask refuses to build a larger one."""
        return 2 * self.max_history_bytes + self.max_artifact_bytes + ANSWER_OVERHEAD_BYTES

    def max_send_bytes(self, max_list_page_bytes: int) -> int:
        """The largest message the server sends (grpc.max_send_message_length): such an answer, or a ListTasks
        page, with room for a 0.3 client's form of it. Nothing larger leaves."""
        return max(self.max_answer_bytes, max_list_page_bytes) * 5 // 4


DEFAULT_TASK_LIMITS = TaskLimits()
