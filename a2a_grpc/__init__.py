"""a2a-grpc: a gRPC-first A2A v1.0 server and client."""

from a2a_grpc import _moved

_moved.install()
