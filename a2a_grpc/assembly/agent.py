"""The agent a server runs, named by `serve --agent MODULE:ATTR`."""

from __future__ import annotations

import logging

from a2a_grpc.agent import AgentExecutor, check_agent
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.loading import load_object

log = logging.getLogger("a2a_grpc.server")  # the server's lines, under the one name operators filter on


def load_agent(spec: str | None) -> AgentExecutor:
    """The agent named `MODULE:ATTR`: a class or factory (called with no arguments) or an instance."""
    if spec is None:
        return EchoAgent()
    agent = check_agent(load_object(spec, "--agent", "agent", lambda target: hasattr(target, "execute")), spec)
    if not callable(getattr(agent, "cancel", None)):
        log.warning(
            "agent %s has no cancel(context, events) method: CancelTask interrupts its execute() and marks "
            "the task canceled without asking it",
            spec,
        )
    return agent
