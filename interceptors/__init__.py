"""gRPC interceptors for A2A: `interceptors.server` for agents, `interceptors.client` for callers."""
