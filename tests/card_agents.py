"""Agents whose cards `serve` builds (a2a_grpc.card.from_agent): one that describes itself, one that does not,
one whose skills are malformed. They complete each task with the text they were sent."""

from __future__ import annotations

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.extensions import Extension
from a2a_grpc.generated import a2a_pb2

TICKET_EXTENSION = "https://example.com/ext/ticket-priority/v1"


class _Echoing:
    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.artifact(text=context.text(), name="echo", last_chunk=True)
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


class TicketAgent(_Echoing):
    name = "Ticket triage"
    description = "Sorts support tickets by urgency."
    version = "2.1.0"
    skills = [
        {"id": "triage", "name": "Triage", "description": "Rates a ticket's urgency.", "tags": ["support"]},
        a2a_pb2.AgentSkill(
            id="summarise", name="Summarise", description="Sums a ticket up.", tags=["support"], examples=["..."]
        ),
    ]
    default_input_modes = ["text/plain", "application/json"]
    default_output_modes = ["application/json"]
    extensions = [Extension(uri=TICKET_EXTENSION, description="The ticket's priority.")]


class PlainAgent(_Echoing):
    """Answers with what it was sent.

    Nothing else about it is of interest to a caller.
    """


class MisspelledSkillAgent(_Echoing):
    name = "Misspelled"
    skills = [{"id": "one", "name": "One", "description": "One skill.", "tagz": ["x"]}]
