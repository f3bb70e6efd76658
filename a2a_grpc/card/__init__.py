"""The agent card: its model (`model`), the card built from the agent's attributes (`from_agent`), how the
server serves it over HTTP (`http`), signs it (`signing`) in a canonical form (`canonical`), and how a client
resolves (`resolution`) and verifies (`verification`) it; what resolution and verification raise is in `errors`.

The model, `card_from_agent` and the errors are importable from here; the other rooms from their modules (verification needs the
JOSE libraries, which a server without signed cards never loads).
"""

from a2a_grpc.card.errors import (
    AgentCardError,
    CardFetchError,
    CardFormatError,
    CardTimeoutError,
    CardTooLargeError,
)
from a2a_grpc.card.from_agent import card_from_agent
from a2a_grpc.card.model import (
    GRPC_BINDING,
    PROTOCOL_VERSION,
    CardError,
    card_json,
    check_card,
    complete_card,
    load_card,
    register_card_extensions,
)

__all__ = [
    "GRPC_BINDING",
    "PROTOCOL_VERSION",
    "AgentCardError",
    "CardError",
    "CardFetchError",
    "CardFormatError",
    "CardTimeoutError",
    "CardTooLargeError",
    "card_from_agent",
    "card_json",
    "check_card",
    "complete_card",
    "load_card",
    "register_card_extensions",
]
