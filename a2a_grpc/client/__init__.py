"""The A2A client: `A2AClient` over the generated stubs (`agent_client`), its resumable event streams
(`streams`), and the `a2a-grpc send`/`get`/`card` commands built on it (`cli`)."""

from a2a_grpc.card.errors import AgentCardError
from a2a_grpc.card.resolution import (
    CARD_FETCH_TIMEOUT_SECONDS,
    card_url,
    fetch_agent_card,
    grpc_interface,
    is_card_url,
)
from a2a_grpc.client.agent_client import A2AClient, CallOptions, ExtensionPropagator, Result, text_message
from a2a_grpc.client.streams import (
    MAX_RESUME_ATTEMPTS,
    RESUME_DELAYS_SECONDS,
    EventStream,
    ResumingStream,
    StartCall,
)

__all__ = [
    "CARD_FETCH_TIMEOUT_SECONDS",
    "MAX_RESUME_ATTEMPTS",
    "RESUME_DELAYS_SECONDS",
    "A2AClient",
    "AgentCardError",
    "CallOptions",
    "EventStream",
    "ExtensionPropagator",
    "Result",
    "ResumingStream",
    "StartCall",
    "card_url",
    "fetch_agent_card",
    "grpc_interface",
    "is_card_url",
    "text_message",
]
