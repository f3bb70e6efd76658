"""The chaos harness: `scripts/chaos [--profile ci|soak] [--duration SECONDS] [--seed N]`.

Real `a2a-grpc serve` processes, one scenario after another (the default server with its text access log,
JSON access log on SQLite with metrics scraped and tracing on, authentication and limits, push delivery to
a misbehaving webhook, two replicas on PostgreSQL), each driven by a seeded, bounded, randomized workload
over all 11 RPCs whose clients cut their calls (cancelled streams, 1-5 ms deadlines, channels closed under
their calls, slow readers, malformed bodies, reconnect-and-resume; and over JSON-RPC and HTTP+JSON, SSE streams
closed mid-stream or left unread, requests given up after a few ms, and garbage bodies), while faults are injected (SIGKILL
and SIGSTOP of a replica, PostgreSQL stopped and started again). After each round and at the end the
invariants are checked (`bench.chaos.invariants`); it prints one summary line and exits 1 on any violation,
naming the seed that reproduces it. All traffic stays on loopback.
"""
