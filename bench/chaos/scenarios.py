"""The server configurations the chaos harness runs, each with its callers and the faults it injects.

Every scenario runs the writer card (streaming and push declared) and the chaos agent, with the access log
on as `a2a-grpc serve` has it by default. The text-log and auth+limits scenarios also call the HTTP port's
JSON-RPC and HTTP+JSON faces (bench.chaos.faces). The features that touch a call's end or a task's life are
switched on in turn: the text access log on SQLite; the JSON access log on SQLite with /metrics scraped
throughout and tracing on; authentication (bearer token, API key, JWT, and a share of bad credentials of
each kind) with rate and stream limits, and floods of calls to unknown methods (bench.chaos.flood); push
delivery to a misbehaving webhook; tasks grown until their history is full (bench.chaos.growth); heavy listings
flooding a filled store (bench.chaos.readload); two replicas on PostgreSQL with a replica killed, a replica
stopped for three lease periods, and PostgreSQL itself stopped for a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bench.chaos import growth, readload
from bench.chaos.faces import HTTP_OPERATIONS
from bench.chaos.flood import LIMITED_FLOOD_OPERATIONS
from bench.chaos.ledger import Caller
from bench.chaos.legacy import LEGACY_OPERATIONS
from bench.chaos.workload import OPERATIONS, Operations

CARD = Path(__file__).resolve().parents[2] / "examples" / "writer-card.json"
V1 = ("a2a-version", "1.0")
LEASE_SECONDS = 2.0
KILL, STOP, POSTGRES_DOWN = "kill a replica", "stop a replica", "stop PostgreSQL"
JWT_ISSUER, JWT_AUDIENCE = "https://issuer.chaos.invalid", "a2a-chaos"
BOTH_FACES = OPERATIONS + LEGACY_OPERATIONS  # the 1.0 calls and the 0.3 face's
ALL_FACES = BOTH_FACES + HTTP_OPERATIONS  # and the HTTP port's JSON-RPC and HTTP+JSON faces
STREAMS_PER_CALLER = 4


@dataclass(frozen=True)
class Scenario:
    """`setup(workdir)` makes the files the flags name and returns (flags, callers); `faults` cycle over the
    rounds after the first."""

    name: str
    setup: Callable[[Path], tuple[list[str], list[Caller]]]
    store: str = "sqlite"  # or "postgres"
    replicas: int = 1
    push: bool = False
    scrape_metrics: bool = False
    faults: tuple[str, ...] = field(default_factory=tuple)
    operations: Operations = OPERATIONS
    env: Mapping[str, str] = field(default_factory=dict)  # the servers' environment, besides ours
    stream_slots: int = 0  # its --max-streams-per-caller: after each round, so many fresh streams admitted at once

    def fault_of(self, round_number: int) -> str | None:
        if not self.faults or round_number == 0:
            return None
        return self.faults[(round_number - 1) % len(self.faults)]


def anonymous(_: Path) -> tuple[list[str], list[Caller]]:
    return [], [Caller("anonymous", (V1,))]


def json_metrics_tracing(_: Path) -> tuple[list[str], list[Caller]]:
    return ["--log-format", "json", "--tracing"], [Caller("anonymous", (V1,))]


def _authenticated(workdir: Path) -> tuple[list[str], list[Caller]]:
    """A bearer token, an API key and a JWT accepted; a wrong one of each refused. Limits low enough to bite."""
    keys = workdir / "api-keys"
    keys.write_text("chaos-api-key=bob\n")
    signing, stranger = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    public = workdir / "jwt-public.pem"
    public.write_bytes(
        signing.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    flags = [
        *("--auth-token", "chaos-bearer=alice", "--api-keys", str(keys)),
        *("--jwt-key", str(public), "--jwt-issuer", JWT_ISSUER, "--jwt-audience", JWT_AUDIENCE),
        *("--max-requests-per-second", "30", "--max-streams-per-caller", str(STREAMS_PER_CALLER)),
    ]
    callers = [
        Caller("alice (bearer)", (V1, ("authorization", "Bearer chaos-bearer"))),
        Caller("bob (API key)", (V1, ("x-api-key", "chaos-api-key"))),
        Caller("carol (JWT)", (V1, ("authorization", "Bearer " + _token(signing, "carol")))),
        Caller("a wrong bearer token", (V1, ("authorization", "Bearer guessed")), accepted=False),
        Caller("a wrong API key", (V1, ("x-api-key", "guessed")), accepted=False),
        Caller("a JWT of another key", (V1, ("authorization", "Bearer " + _token(stranger, "eve"))), accepted=False),
    ]
    return flags, callers


def _token(key: ec.EllipticCurvePrivateKey, subject: str) -> str:
    now = int(time.time())
    claims = {"iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "sub": subject, "iat": now, "exp": now + 86_400}
    return jwt.encode(claims, key, algorithm="ES256")


def _push(_: Path) -> tuple[list[str], list[Caller]]:
    flags = ["--push-allow", "127.0.0.1", "--push-allow-http", "--push-timeout", "1", "--push-max-attempts", "3"]
    return flags, [Caller("anonymous", (V1,))]


def _replicas(_: Path) -> tuple[list[str], list[Caller]]:
    return ["--lease-seconds", str(LEASE_SECONDS), "--poll-interval", "0.5"], [Caller("anonymous", (V1,))]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("text-log", anonymous, operations=ALL_FACES),
    Scenario(
        "json-log+metrics+tracing",
        json_metrics_tracing,
        scrape_metrics=True,
        env={"OTEL_TRACES_EXPORTER": "none"},  # spans made and ended, exported nowhere
    ),
    Scenario(
        "auth+limits",
        _authenticated,
        operations=ALL_FACES + LIMITED_FLOOD_OPERATIONS,
        stream_slots=STREAMS_PER_CALLER,
    ),
    Scenario("push", _push, push=True),
    Scenario("history-growth", growth.setup, operations=growth.GROWTH_OPERATIONS),
    Scenario("read-load", readload.setup, operations=readload.READ_LOAD_OPERATIONS),
    Scenario("replicas", _replicas, store="postgres", replicas=2, faults=(KILL, STOP, POSTGRES_DOWN)),
)
