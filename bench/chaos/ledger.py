"""What the chaos clients saw: calls, cuts, status codes, acknowledged tasks, and every violation."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_LISTED_VIOLATIONS = 20  # kept in full; the rest are only counted


@dataclass(frozen=True)
class Caller:
    """One client identity: the headers every call of it sends (version, credentials), and whether the server
    accepts its credentials."""

    name: str
    metadata: tuple[tuple[str, str], ...]
    accepted: bool = True


@dataclass
class Ledger:
    calls: int = 0
    cuts: int = 0  # calls the client cut itself: cancelled, closed under, or given a deadline of a few ms
    faults: int = 0  # faults injected into servers and the database
    codes: Counter[str] = field(default_factory=Counter)
    acknowledged: dict[str, Caller] = field(default_factory=dict)  # task id -> the caller it was answered to
    open_tasks: list[tuple[str, Caller]] = field(default_factory=list)  # INPUT_REQUIRED, for streams and cancels
    violations: list[str] = field(default_factory=list)
    violation_count: int = 0
    health_latencies: list[float] = field(default_factory=list)  # seconds, of health checks during the rounds

    def violation(self, text: str) -> None:
        self.violation_count += 1
        if len(self.violations) < MAX_LISTED_VIOLATIONS:
            self.violations.append(text)

    def acknowledge(self, task_id: str, caller: Caller) -> None:
        self.acknowledged[task_id] = caller
