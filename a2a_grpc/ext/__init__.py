"""Extensions that ship with a2a-grpc, built on the extension API (`a2a_grpc.extensions`).

- `a2a_grpc.ext.timestamp`: the timestamp extension of the A2A samples repository.
- `a2a_grpc.ext.traceability`: the traceability extension of the A2A samples repository.
"""
