"""a2a-grpc: a gRPC-first A2A v1.0 server and client."""
