"""What one task may hold, whatever its callers send and its agent publishes, and the largest answer such a
task makes."""

from __future__ import annotations

from dataclasses import dataclass

MAX_HISTORY_PER_TASK = 1000  # messages kept in a task's history; older ones are dropped, oldest first
MAX_ARTIFACT_BYTES_PER_TASK = 64 * 1024 * 1024  # bytes a task's artifacts may take
MAX_PUSH_CONFIGS_PER_TASK = 10  # push notification configs a task keeps; one more is RESOURCE_EXHAUSTED
# Bytes a task's history may take: sixteen requests of gRPC's default 4 MiB, or thousands of ordinary
# messages; a message past them is refused (RESOURCE_EXHAUSTED, TASK_HISTORY_FULL), an agent's publish fails.
MAX_HISTORY_BYTES_PER_TASK = 64 * 1024 * 1024
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
