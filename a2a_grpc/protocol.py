"""The A2A wire constants that the server and the client both use."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2

A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
SERVICE_NAME = A2A_SERVICE.full_name  # lf.a2a.v1.A2AService
A2A_METHOD_PREFIX = f"/{SERVICE_NAME}/"

VERSION_HEADER = "a2a-version"
EXTENSIONS_HEADER = "a2a-extensions"
V03_EXTENSIONS_HEADER = "x-a2a-extensions"  # what the 0.3 SDKs send (the 0.3 face reads both)
AUTHORIZATION_HEADER = "authorization"

# This server's stream-resume extension: an activating stream's events carry `{"seq": N}` under the URI in
# their metadata, and a SubscribeToTask that sends STREAM_AFTER_HEADER: N continues after event N.
RESUME_EXTENSION_URI = "https://github.com/a2a-grpc/a2a-grpc/extensions/stream-resume/v1"
STREAM_AFTER_HEADER = "a2a-stream-after"

AGENT_CARD_PATH = "/.well-known/agent-card.json"

TERMINAL_STATES = frozenset(
    {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
)
INTERRUPTED_STATES = frozenset({a2a_pb2.TASK_STATE_INPUT_REQUIRED, a2a_pb2.TASK_STATE_AUTH_REQUIRED})
RUNNING_STATES = frozenset({a2a_pb2.TASK_STATE_SUBMITTED, a2a_pb2.TASK_STATE_WORKING})  # an agent works on it


def is_a2a_method(method: str) -> bool:
    """Whether a full method path (`/package.Service/Method`) names an A2AService RPC."""
    return method.startswith(A2A_METHOD_PREFIX)
