"""The A2A wire constants that the server and the client both use."""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.wire import A2A_METHOD_PREFIX as A2A_METHOD_PREFIX
from a2a_grpc.wire import EXTENSIONS_HEADER as EXTENSIONS_HEADER
from a2a_grpc.wire import SERVICE_NAME as SERVICE_NAME
from a2a_grpc.wire import V03_EXTENSIONS_HEADER as V03_EXTENSIONS_HEADER
from a2a_grpc.wire import VERSION_HEADER as VERSION_HEADER
from a2a_grpc.wire import is_a2a_method as is_a2a_method

A2A_SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]  # named SERVICE_NAME (a2a_grpc.wire)

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
