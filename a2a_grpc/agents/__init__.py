"""Agents that ship with a2a-grpc: the default echo agent and a streaming, multi-turn example."""
