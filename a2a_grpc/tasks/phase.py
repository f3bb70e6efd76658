"""The phases of a live task (`TaskMachine.phase`): what each allows is the machine's to check."""

from __future__ import annotations

import enum

from a2a_grpc.protocol import INTERRUPTED_STATES, TERMINAL_STATES


class Phase(enum.Enum):
    IDLE = "idle"  # held for reads or streams, no run of the agent here; not settled (maybe run elsewhere)
    RUNNING = "running"  # a run of the agent here, its task shown or not yet
    CANCELLING = "cancelling"  # a run here, asked to cancel
    INTERRUPTED = "interrupted"  # waiting for input or auth; no run here
    FINAL = "final"  # a terminal state; the run that got there may still be ending
    DROPPED = "dropped"  # forgotten: the agent replied with a Message, or the store refused a write


RUN_PHASES = (Phase.RUNNING, Phase.CANCELLING)


class TransitionError(RuntimeError):
    """A transition the task's phase does not allow: a bug of the server, never of a caller or an agent."""


def resting_phase(state: int) -> Phase:
    """The phase of a task with no run here."""
    if state in TERMINAL_STATES:
        return Phase.FINAL
    if state in INTERRUPTED_STATES:
        return Phase.INTERRUPTED
    return Phase.IDLE
