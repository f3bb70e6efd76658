"""How an A2AServer (a2a_grpc.server) is put together: its settings (settings.py), the builder that makes every part
from them in dependency order (build.py) with what it serves loaded and checked first (served.py: the agent, as agent.py loads it, the cards,
TLS, authentication), the parts that start and stop themselves (grpc_port.py, http_port.py,
readiness.py; cards.py and services.py make what they serve), and the order they start and stop in (lifecycle.py)."""
