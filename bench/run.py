"""`scripts/bench` (python -m bench): start every server, drive it, print the table and write the JSON.

Case families (filter them with --cases, shell-style patterns):
  send.bare, send.sdk, send.{memory,sqlite}.{ext,noext}   SendMessage, echo agent, at each --concurrency
  send.bare-asks                                          send.bare asking gRPC on every call what our chain asks
                                                          (metadata, peer, deadline; the echo in the trailers)
  send.bare.interceptor                                   send.bare behind the standard A2AServerInterceptor, the
                                                          bench's extension required (and requested)
  send.bare-front                                         send.bare behind a2a_grpc.connection_front: what the
                                                          cap per address (its relay to grpc) costs
  send.memory.ext-headers                               ext, with unary calls echoing in headers too
  send.memory.v03{,-noext}                                send.memory.{ext,noext}'s settings, called on the A2A 0.3
                                                          face (a2a.v1.A2AService: no a2a-version, the extension
                                                          requested in x-a2a-extensions), for the 0.3/1.0 ratio
  send.http.{jsonrpc,rest}.{ours,sdk}                     SendMessage, echo agent, over JSON-RPC and HTTP+JSON: our
                                                          HTTP faces (memory store, the bench's extension required
                                                          and requested, as send.memory.ext) and the SDK's own
                                                          Starlette apps under uvicorn (bench.sdk_http_server)
  stream.{bare,sdk,ours}                                  SendStreamingMessage, CHUNKS artifact chunks per task
  fanout.{sdk,ours}                                       SubscribeToTask, --subscribers streams on one task
  memory.ours                                             server RSS after --memory-tasks stored tasks
  replicas.send.{sqlite,pg,pg-workers2}                   SendMessage, echo agent, one process on SQLite, one on
                                                          PostgreSQL, `--workers 2` on PostgreSQL (8 connections
                                                          per load process each, so that both workers get some)
  replicas.subscribe                                      cross-replica event latency: a task publishing 100
                                                          events/s on one server, streamed from another (PostgreSQL)
  push.send.sqlite{,.off}                                 SendMessage, echo agent, SQLite, each message with one push
                                                          config naming the bench's loopback webhook receiver (.off:
                                                          the identical server and messages, without the config);
                                                          then the delivery latency and every notification counted
  telemetry.send.{off,on,tracing}                         SendMessage, echo agent, memory store, at the highest
                                                          --concurrency only: access log, metrics and tracing off;
                                                          the access log written (JSON, INFO, a file) and metrics;
                                                          those and tracing (a span per call, exported nowhere)
  growth.{memory,sqlite,postgres}                         each call's p50/p99 and the start-up on stores of each
                                                          --growth-sizes tasks, through `a2a-grpc serve`; writes
                                                          the tables and a plot beside --out (bench/growth.py)
  auth.send.{plain,jwt,tls}                               SendMessage, echo agent, memory store, at the highest
                                                          --concurrency only: plaintext without authentication;
                                                          every call with a JWT (`--jwt-key`: one token, cached by
                                                          the server once verified); TLS (`--tls-cert`). Keys and
                                                          certificates are made for the run; each run checks first
                                                          that a call without the token, or over plaintext, fails
  readload.sqlite                                         12 clients looping ListTasks with a status filter on a
                                                          SQLite store of 100,000 tasks (--quick: 10,000), at
                                                          least 10 s: readiness polled every 100 ms (NOT_SERVING
                                                          answers, health latency), GetTask latency meanwhile

The PostgreSQL cases run on a throwaway cluster the bench starts on 127.0.0.1 (or on --postgres URL), each
server on a database of its own; without the PostgreSQL server binaries they are skipped (one line says so).
Just these rows: --cases 'replicas.*' --concurrency 64 (or --cases 'push.*', 'telemetry.*' or 'auth.*').

The send cases at one concurrency are measured together: all their servers run at once and the load moves
from one to the next every --slice seconds, so a ratio between two of them pairs turns taken a second apart.
The other cases run one after another. Every case runs --repeat times round-robin, on fresh servers each time
(one server process may run a few percent faster or slower than the next).

The servers run on the first half of the CPUs this process may use and the load workers on the other half
(--no-pin: wherever the scheduler puts them): on 2 cores, how the scheduler shares them out between the server
and two load workers otherwise swings a server's rate by a factor of two from one second to the next. A
server's half holds all its processes (a `--workers` supervisor and its workers) and the bench's PostgreSQL
cluster: on 2 cores, one core for two workers, so only --no-pin shows what a second worker gains. The push
receiver runs with the load workers: like them it stands for the world outside the server, so the server's half
stays the server's and the receiver's CPU is not charged to it (it is counted apart).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import grpc

from a2a_grpc.settings.defaults import MEMORY_STORE_MAX_TASKS
from bench import growth, growth_report, measure, readload, report
from bench.credentials import AUDIENCE, ISSUER, Credentials
from bench.databases import Databases
from bench.http_load import HTTP_FACES, HTTP_JSON, JSONRPC
from bench.loadgen import V03, V10, LoadPool, Metadata
from bench.pg_cluster import PostgresUnavailable
from bench.procs import ServerProcess
from bench.protocol import BENCH_EXTENSION_URI, CHUNKS, ECHO_EVENTS
from bench.push import DRAIN_LIMIT_SECONDS, STALL_SECONDS, PushReceiver
from bench.sdk_env import SDK_REQUIREMENT, SdkUnavailableError, sdk_http_python, sdk_python

ROOT = Path(__file__).resolve().parent.parent
EXTENSION_METADATA = (*measure.V1, ("a2a-extensions", BENCH_EXTENSION_URI))
V03_EXTENSION_METADATA = (*measure.V03, ("x-a2a-extensions", BENCH_EXTENSION_URI))  # what the 0.3 SDKs send
REPLICA_CHANNELS = 8  # connections per load process for the replicas.send cases: the kernel spreads connections
TICK_RATE = 100.0  # events/s published in replicas.subscribe
# what a call without credentials (plaintext, no token) gets from each auth.* server
REFUSED_WITH = {"jwt": grpc.StatusCode.UNAUTHENTICATED, "tls": grpc.StatusCode.UNAVAILABLE}


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # send | stream | fanout | memory | replica | readload | growth
    server: str  # ours | bare | sdk
    store: str = "memory"  # memory | sqlite | postgres
    extension: bool = False
    unary_echo: str = "trailers"  # "headers": unary calls echo in headers too (ServerSettings.echo_unary_headers)
    workers: int = 1  # server processes sharing the port (`--workers`)
    channels: int = 1  # connections per load process, at least
    # "on": every message carries a push config naming the bench's receiver; "off": the same server (allowed to
    # reach the receiver), messages without one; "": a server without the push settings
    push: str = ""
    # our_server --telemetry: "off", "on" (access log JSON to a file, metrics), "tracing" (and spans); "": as
    # `a2a-grpc serve` runs by default (the text access log on stderr, a file)
    telemetry: str = ""
    auth: str = ""  # "jwt": every call needs the run's JWT; "tls": the server speaks TLS; "": neither
    top_only: bool = False  # measured at the highest --concurrency only
    asks: bool = False  # the bare servicer asks gRPC what our chain asks (send.bare-asks; `extension` for its calls)
    front: bool = False  # the bare servicer behind a2a_grpc.connection_front (--max-connections-per-address)
    # the service a send family's calls go to: V10 (lf.a2a.v1) or V03 (a2a.v1, A2A 0.3), or an HTTP binding
    # (bench.http_load: JSONRPC or HTTP_JSON) on the server's HTTP port
    face: str = V10
    interceptor: bool = False  # the bare servicer behind the standard A2AServerInterceptor (send.bare.interceptor)

    def levels(self, concurrency: list[int]) -> list[int]:
        """The concurrencies a send family is measured at."""
        return [max(concurrency)] if self.top_only else list(concurrency)


FAMILIES = (
    Family("send.bare", "send", "bare"),
    Family("send.bare-asks", "send", "bare", extension=True, asks=True),
    Family("send.bare.interceptor", "send", "bare", extension=True, interceptor=True),
    Family("send.bare-front", "send", "bare", front=True),
    Family("send.sdk", "send", "sdk"),
    Family("send.memory.ext", "send", "ours", "memory", extension=True),
    Family("send.memory.noext", "send", "ours", "memory"),
    Family("send.memory.ext-headers", "send", "ours", "memory", extension=True, unary_echo="headers"),
    Family("send.memory.v03", "send", "ours", "memory", extension=True, face=V03),
    Family("send.memory.v03-noext", "send", "ours", "memory", face=V03),
    Family("send.sqlite.ext", "send", "ours", "sqlite", extension=True),
    Family("send.http.jsonrpc.ours", "send", "ours", "memory", extension=True, face=JSONRPC),
    Family("send.http.rest.ours", "send", "ours", "memory", extension=True, face=HTTP_JSON),
    Family("send.http.jsonrpc.sdk", "send", "sdk", face=JSONRPC),
    Family("send.http.rest.sdk", "send", "sdk", face=HTTP_JSON),
    Family("send.sqlite.noext", "send", "ours", "sqlite"),
    Family("stream.bare", "stream", "bare"),
    Family("stream.sdk", "stream", "sdk"),
    Family("stream.ours", "stream", "ours"),
    Family("fanout.sdk", "fanout", "sdk"),
    Family("fanout.ours", "fanout", "ours"),
    Family("memory.ours", "memory", "ours"),
    Family("replicas.send.sqlite", "send", "ours", "sqlite", channels=REPLICA_CHANNELS),
    Family("replicas.send.pg", "send", "ours", "postgres", channels=REPLICA_CHANNELS),
    Family("replicas.send.pg-workers2", "send", "ours", "postgres", workers=2, channels=REPLICA_CHANNELS),
    Family("replicas.subscribe", "replica", "ours", "postgres"),
    Family("push.send.sqlite", "send", "ours", "sqlite", push="on"),
    Family("push.send.sqlite.off", "send", "ours", "sqlite", push="off"),
    Family("telemetry.send.off", "send", "ours", telemetry="off", top_only=True),
    Family("telemetry.send.on", "send", "ours", telemetry="on", top_only=True),
    Family("telemetry.send.tracing", "send", "ours", telemetry="tracing", top_only=True),
    Family("growth.memory", "growth", "ours", "memory"),
    Family("growth.sqlite", "growth", "ours", "sqlite"),
    Family("growth.postgres", "growth", "ours", "postgres"),
    Family("auth.send.plain", "send", "ours", top_only=True),
    Family("auth.send.jwt", "send", "ours", auth="jwt", top_only=True),
    Family("auth.send.tls", "send", "ours", auth="tls", top_only=True),
    Family("readload.sqlite", "readload", "ours", "sqlite"),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, help="measured seconds per case (default 3; --quick: 1)")
    parser.add_argument("--warmup", type=float, help="unmeasured seconds before each case (default 1; --quick: 0.3)")
    parser.add_argument("--concurrency", default="1,16,64", help="SendMessage concurrencies, comma-separated")
    parser.add_argument(
        "--cases", default="*", help="comma-separated patterns of case families, e.g. 'send.*,fanout.*'"
    )
    parser.add_argument("--out", default="bench-results.json", help="JSON results file")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="run the PostgreSQL cases on this server (the bench creates and drops databases of its own on it) "
        "instead of a throwaway cluster",
    )
    parser.add_argument("--quick", action="store_true", help="short cases and fewer stored tasks, for a smoke run")
    parser.add_argument("--load-procs", type=int, default=2, help="load generator processes (default 2)")
    parser.add_argument("--channels", type=int, default=1, help="connections per load process (default 1)")
    parser.add_argument("--stream-concurrency", type=int, default=8, help="concurrent streams in stream.* cases")
    parser.add_argument("--subscribers", type=int, default=100, help="subscribers on one task in fanout.* cases")
    parser.add_argument("--memory-tasks", type=int, help="tasks stored for memory.ours (default 100000; --quick: 5000)")
    parser.add_argument(
        "--growth-sizes",
        help="stored tasks of the growth.* cases, comma-separated (default 1000,10000,100000; --quick: 1000); "
        f"the memory store's only up to its bound ({MEMORY_STORE_MAX_TASKS:,})",
    )
    parser.add_argument("--growth-calls", type=int, help="calls per growth.* measure (default 200; --quick: 20)")
    parser.add_argument(
        "--cache-dir",
        default=str(Path.home() / ".cache" / "a2a-grpc-bench"),
        help="where the growth.* cases keep the stores they loaded, for the next run (default ~/.cache/a2a-grpc-bench)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="run every case N times round-robin, on fresh servers, and keep the median run (send cases: and pair "
        "the turns of every run) (default 3; --quick: 1): single runs vary by several percent on these machines",
    )
    parser.add_argument(
        "--slice", type=float, default=0.5, help="measured seconds of each turn of a send case (default 0.5)"
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="let servers and load workers share every CPU (default: half each)"
    )
    parser.add_argument("--sdk-uvloop", action="store_true", help="run the SDK server on uvloop (it ships on asyncio)")
    parser.add_argument("--profile", metavar="DIR", help="record our servers with py-spy into DIR (slows them down)")
    parser.add_argument(
        "--profile-native", action="store_true", help="with --profile: include C/Cython frames (grpc, uvloop)"
    )
    args = parser.parse_args(argv)
    args.duration = args.duration if args.duration is not None else (1.0 if args.quick else 3.0)
    args.repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 1.0)
    args.memory_tasks = args.memory_tasks if args.memory_tasks is not None else (5000 if args.quick else 100_000)
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    sizes = args.growth_sizes or ("1000" if args.quick else "1000,10000,100000")
    args.growth_sizes = [int(size) for size in sizes.split(",") if size.strip()]
    args.growth_calls = args.growth_calls if args.growth_calls is not None else (20 if args.quick else 200)
    patterns = [p.strip() for p in args.cases.split(",") if p.strip()]
    args.families = [f for f in FAMILIES if any(fnmatch.fnmatchcase(f.name, p) for p in patterns)]
    if not args.families:
        parser.error(f"--cases {args.cases!r} matches no case family: {', '.join(f.name for f in FAMILIES)}")
    counts = (args.load_procs, args.channels, args.repeat, args.stream_concurrency, args.subscribers, args.memory_tasks)
    counts += (args.growth_calls, *args.growth_sizes)
    if not args.concurrency or min(args.concurrency) < 1 or min(args.duration, args.slice) <= 0 or min(counts) < 1:
        parser.error("every count, concurrency and duration must be positive")
    return args


def _version(package: str) -> str | None:
    try:
        return package_metadata.version(package)
    except package_metadata.PackageNotFoundError:
        return None


def _cpu_halves(pinned: bool) -> tuple[set[int] | None, set[int] | None]:
    """The CPUs for the servers and those for the load workers (None: any)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pinned or len(cpus) < 2:
        return None, None
    return set(cpus[: len(cpus) // 2]), set(cpus[len(cpus) // 2 :])


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate (the lower middle one of an even count), listing every run's rate and
    carrying the per-cycle figures of every run (send cases) and every run's push shortfall (push cases)."""
    measured = sorted((r for r in runs if "rate" in r), key=lambda r: r["rate"])
    if not measured:
        return runs[0]
    median = dict(measured[(len(measured) - 1) // 2])
    median["runs"] = [r.get("rate") for r in runs]
    for key in ("cycle_rates", "cycle_cpu_us"):
        if key in median:
            median[key] = [value for r in runs for value in r.get(key, [])]
    if "push_missing" in median:  # a notification lost in any run is lost
        median["push_missing_runs"] = [r.get("push_missing") for r in runs]
        median["push_duplicates_runs"] = [r.get("push_duplicates") for r in runs]
    return median


def _stop_profiler(profiler: subprocess.Popen[bytes]) -> None:
    profiler.send_signal(signal.SIGINT)
    try:
        profiler.wait(30)
    except subprocess.TimeoutExpired:
        profiler.kill()
        profiler.wait(5)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        cycles = max(1, round(args.duration / args.slice))
        self.settings = measure.Settings(
            args.duration, args.warmup, channels=args.channels, slice=args.slice, cycles=cycles
        )
        self.records: list[dict[str, Any]] = []  # one per case: the run with the median rate
        self._runs: dict[str, list[dict[str, Any]]] = {}  # every run of every case, in first-run order
        self._repetition = 0
        self.pool: LoadPool | None = None
        self._sdk: Path | SdkUnavailableError | None = None
        self._scratch = tempfile.TemporaryDirectory(prefix="a2a-bench-")
        self.server_cpus, self.load_cpus = _cpu_halves(not args.no_pin)
        self.families: list[Family] = list(args.families)
        self.databases = Databases(args.postgres, self.server_cpus)
        self.notes: list[str] = []  # for the report: the PostgreSQL cases skipped, and why
        self._refusals: dict[Family, str] = {}  # this run's auth.* servers: how they refused an unsecured call
        self.growth_records: list[dict[str, Any]] = []  # the growth.* cases': one per store and size

    # ---- servers -------------------------------------------------------------------------------

    def _sdk_http_python(self) -> Path:
        return sdk_http_python(ROOT)

    def _sdk_python(self) -> Path:
        if self._sdk is None:
            try:
                self._sdk = sdk_python(ROOT)
            except SdkUnavailableError as error:
                self._sdk = error
        if isinstance(self._sdk, SdkUnavailableError):
            raise self._sdk
        return self._sdk

    def _server_argv(self, family: Family, store: str = "memory") -> list[str]:
        agent = {"send": "echo", "memory": "echo", "replica": "ticks", "readload": "echo"}.get(family.kind, "chunks")
        if family.server == "bare":
            flags = [
                *(["--asks"] if family.asks else []),
                *(["--interceptor"] if family.interceptor else []),
                *(["--front"] if family.front else []),
            ]
            return [sys.executable, "-m", "bench.bare_server", *flags]
        if family.server == "sdk" and family.face in HTTP_FACES:
            return [str(self._sdk_http_python()), "-m", "bench.sdk_http_server", "--binding", family.face]
        if family.server == "sdk":
            argv = [str(self._sdk_python()), "-m", "bench.sdk_server", "--agent", agent]
            return argv + (["--uvloop"] if self.args.sdk_uvloop else [])
        if family.store == "sqlite":
            store = f"sqlite:///{self._store_path(family)}"
        if family.extension:
            agent = "echo-ext"
        argv = [sys.executable, "-m", "bench.our_server", "--store", store, "--agent", agent]
        argv += ["--unary-echo", family.unary_echo, "--workers", str(family.workers)]
        argv += ["--push-allow", "127.0.0.1", "--push-allow-http"] if family.push else []
        if family.telemetry:
            argv += ["--telemetry", family.telemetry, "--access-log-file", str(self._access_log(family))]
        argv += self._auth_flags(family) + (["--http"] if family.face in HTTP_FACES else [])
        return argv + (["--no-extensions"] if family.kind == "send" and not family.extension else [])

    def _store_path(self, family: Family) -> str:
        """A SQLite family's store file in the scratch directory."""
        return f"{self._scratch.name}/{family.name}.db"

    @functools.cached_property
    def credentials(self) -> Credentials:
        """The auth.* cases' keys, certificates and token, made on first use in the scratch directory."""
        return Credentials.create(Path(self._scratch.name) / "credentials")

    def _auth_flags(self, family: Family) -> list[str]:
        """The server flags of an auth.* family: JWT verification with the run's key, or TLS."""
        if family.auth == "jwt":
            return ["--jwt-key", str(self.credentials.jwt_key), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
        if family.auth == "tls":
            return ["--tls-cert", str(self.credentials.tls_cert), "--tls-key", str(self.credentials.tls_key)]
        return []

    def _metadata(self, family: Family) -> Metadata:
        """What every call of a send family carries."""
        if family.face == V03:
            return V03_EXTENSION_METADATA if family.extension else measure.V03
        if family.extension:
            return EXTENSION_METADATA
        if family.auth == "jwt":
            return (*measure.V1, ("authorization", f"Bearer {self.credentials.token}"))
        return measure.V1

    def _access_log(self, family: Family) -> Path:
        """Where a telemetry.* family's server writes its access log in this run."""
        return Path(self._scratch.name) / f"{family.name}.{self._repetition + 1}.log"

    def _access_lines(self, family: Family) -> int | None:
        """The lines a telemetry.* family's server has written to its access log so far in this run."""
        path = self._access_log(family)
        if not family.telemetry or not path.exists():
            return None
        with path.open("rb") as log:
            return sum(1 for _ in log)

    def _extras(self, family: Family) -> dict[str, Any]:
        """What a telemetry.* or auth.* record adds: the access log's lines, how an unsecured call was refused."""
        extras: dict[str, Any] = {}
        lines = self._access_lines(family)
        if lines is not None:
            extras["access_log_lines"] = lines
        if family in self._refusals:
            extras["unsecured_call"] = self._refusals[family]
        return extras

    def _profiler(self, family: Family, server: ServerProcess) -> subprocess.Popen[bytes] | None:
        if not self.args.profile or family.server != "ours":
            return None
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(py_spy).exists():
            raise RuntimeError("--profile needs py-spy (pip install py-spy into .venv)")
        out_dir = Path(self.args.profile)
        out_dir.mkdir(parents=True, exist_ok=True)
        argv = [py_spy, "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw"]
        argv += ["--native"] if self.args.profile_native else ["--nonblocking"]
        argv += ["--subprocesses"] if server.workers > 1 else []
        suffix = f".{self._repetition + 1}" if self.args.repeat > 1 else ""
        argv += ["--output", str(out_dir / f"{server.name}{suffix}.txt")]
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # ---- cases ---------------------------------------------------------------------------------

    def _record(self, family: Family, result: dict[str, Any], suffix: str = "") -> None:
        record = {
            "name": family.name + suffix,
            "family": family.name + suffix,
            "kind": family.kind,
            "server": family.server,
            "store": family.store if family.server == "ours" else None,
            "extension": family.extension,
            "face": family.face,
            "workers": family.workers,
            **result,
        }
        if family.name.startswith(("replicas.", "push.", "telemetry.", "auth.")):
            record["cpus"] = len(os.sched_getaffinity(0))
            record["server_cpus"] = len(self.server_cpus) if self.server_cpus else None
        self._runs.setdefault(record["name"], []).append(record)
        print("\n".join(report.row(record)), flush=True)

    def _not_run(self, family: Family, key: str, reason: str) -> None:
        levels: list[int | None] = [*family.levels(self.args.concurrency)] if family.kind == "send" else [None]
        done = {name for name, runs in self._runs.items() if len(runs) > self._repetition}
        for c in levels:
            suffix = f"@{c}" if c is not None else ""
            if family.name + suffix not in done:
                self._record(family, {key: reason, "concurrency": c}, suffix)

    @contextlib.contextmanager
    def _serving(self, family: Family, database: str | None = None, role: str = "") -> Iterator[ServerProcess]:
        """The family's server (recorded by py-spy with --profile) until the block ends; a PostgreSQL family's
        on `database`, else on a new database of its own. `role` tells two servers of one case apart."""
        db_pid = None
        if family.store == "postgres":
            database = database or self.databases.new()
            db_pid = self.databases.db_pid
        argv = self._server_argv(family, database or "memory")
        name = f"{family.name}.{role}" if role else family.name
        tls_roots = self.credentials.ca_pem if family.auth == "tls" else None
        server = ServerProcess(
            name, argv, ROOT, self.server_cpus, workers=family.workers, db_pid=db_pid, tls_roots=tls_roots
        )
        profiler = None
        try:
            profiler = self._profiler(family, server)
            yield server
        finally:
            if profiler is not None:
                _stop_profiler(profiler)
            server.stop()

    def _start_send_servers(
        self, stack: contextlib.ExitStack, pushing: bool = True
    ) -> tuple[dict[Family, ServerProcess], int]:
        """The selected send families' servers (not the pushing ones unless `pushing`), and how many failed to
        start (skipped ones are no failure) or, for an auth.* one, to refuse a call without credentials."""
        servers: dict[Family, ServerProcess] = {}
        failed = 0
        for family in (f for f in self.families if f.kind == "send" and (pushing or f.push != "on")):
            try:
                server = stack.enter_context(self._serving(family))
                if family.auth:
                    self._refusals[family] = measure.unsecured_refusal(server, REFUSED_WITH[family.auth], self.settings)
                servers[family] = server
            except SdkUnavailableError as error:
                self._not_run(family, "skipped", f"{SDK_REQUIREMENT} unavailable: {error}")
            except Exception as error:
                failed += 1
                self._not_run(family, "failed", f"{type(error).__name__}: {error}")
        return servers, failed

    def _start_receiver(self, stack: contextlib.ExitStack) -> tuple[PushReceiver | None, int]:
        """The push receiver when a selected case pushes (on the load workers' CPUs), and how many failed to
        start (those cases are left out of the run)."""
        pushing = [f for f in self.families if f.kind == "send" and f.push == "on"]
        if not pushing:
            return None, 0
        try:
            receiver = PushReceiver(ROOT, self.load_cpus)
        except Exception as error:
            for family in pushing:
                self._not_run(family, "failed", f"push receiver: {type(error).__name__}: {error}")
            return None, len(pushing)
        stack.callback(receiver.stop)
        return receiver, 0

    def run_send_families(self) -> int:
        """One run of every send case, the families interleaved at each concurrency; how many failed."""
        assert self.pool is not None
        with contextlib.ExitStack() as stack:
            receiver, failed = self._start_receiver(stack)
            # without a receiver (none started), the pushing cases are left out: they have their FAILED line
            servers, failed_servers = self._start_send_servers(stack, pushing=not failed)
            failed += failed_servers
            for c in self.args.concurrency:
                # the families measured at this concurrency, side by side
                measured = [family for family in servers if c in family.levels(self.args.concurrency)]
                if not measured:
                    continue
                started = [servers[family] for family in measured]
                metadata = [self._metadata(family) for family in measured]
                channels = [max(self.args.channels, family.channels) for family in measured]
                push = [family.push == "on" for family in measured]
                faces = [family.face for family in measured]
                try:
                    results = measure.measure_send(
                        started, metadata, self.pool, self.settings, c, channels, push, receiver, faces
                    )
                except Exception as error:
                    failed += 1
                    results = [{"failed": f"{type(error).__name__}: {error}", "concurrency": c}] * len(measured)
                for family, result in zip(measured, results, strict=True):
                    self._record(family, {**result, **self._extras(family)}, f"@{c}")
        return failed

    def run_replica_family(self, family: Family) -> None:
        """One run of the cross-replica latency case: two servers on one database."""
        assert self.pool is not None
        database = self.databases.new()
        with (
            self._serving(family, database, "publisher") as publisher,
            self._serving(family, database, "subscriber") as subscriber,
        ):
            result = measure.measure_ticks(publisher, subscriber, self.pool, self.settings, TICK_RATE)
            self._record(family, result)

    def run_growth_family(self, family: Family) -> int:
        """Every size of a growth.* family (the memory store's up to its bound); how many sizes failed."""
        sizes = self.args.growth_sizes
        if family.store == "memory":
            sizes = [size for size in sizes if size <= MEMORY_STORE_MAX_TASKS]
        starts = 1 if self.args.quick else growth.STARTS
        settings = growth.Settings(
            self.args.growth_calls, Path(self.args.cache_dir), self.server_cpus, self.databases.new, starts
        )
        found = growth.run_store(family.store, sizes, settings)
        self.growth_records += found
        return sum("failed" in record for record in found)

    def run_family(self, family: Family) -> None:
        """One run of a stream, fanout, memory or replica family."""
        assert self.pool is not None
        if family.kind == "replica":
            self.run_replica_family(family)
            return
        if family.kind == "readload":
            tasks = readload.QUICK_TASKS if self.args.quick else readload.TASKS
            readload.fill(Path(self._store_path(family)), tasks)
        try:
            with self._serving(family) as server:
                if family.kind == "stream":
                    result = measure.measure_stream(server, self.pool, self.settings, self.args.stream_concurrency)
                elif family.kind == "fanout":
                    result = measure.measure_fanout(server, self.pool, self.settings, self.args.subscribers)
                elif family.kind == "readload":
                    result = readload.measure(server.target, tasks, self.args.duration)
                else:
                    result = measure.measure_memory(server, self.pool, self.settings, self.args.memory_tasks, 64)
                self._record(family, result)
        except SdkUnavailableError as error:
            self._not_run(family, "skipped", f"{SDK_REQUIREMENT} unavailable: {error}")

    def _start_postgres(self) -> int:
        """Start the PostgreSQL server when a selected case needs it; without one, leave those cases out with
        one line saying why (a skip when PostgreSQL cannot run here, else a failure: how many, 0 or 1)."""
        needing = [f for f in self.families if f.store == "postgres"]
        if not needing:
            return 0
        try:
            self.databases.start()
            return 0
        except Exception as error:
            skipped = isinstance(error, PostgresUnavailable)
            reason = str(error) if skipped else f"{type(error).__name__}: {error}"
            self.families = [f for f in self.families if f not in needing]
            line = f"{', '.join(f.name for f in needing)}: {'SKIPPED' if skipped else 'FAILED'}: {reason}"
            self.notes.append(f"PostgreSQL cases {line}")
            print(line, flush=True)
            return 0 if skipped else 1

    def run(self) -> int:
        """Every selected case, `--repeat` times round-robin (memory.ours once); 1 when any case failed."""
        self.pool = LoadPool(self.args.load_procs, self.load_cpus)
        print(report.table([]), flush=True)  # the header; each case prints its row when measured
        failed = self._start_postgres()
        for repetition in range(self.args.repeat):
            self._repetition = repetition
            failed += self.run_send_families()
            for family in self.families:
                if family.kind == "send" or (family.kind in ("memory", "growth") and repetition > 0):
                    continue
                if family.kind == "growth":
                    failed += self.run_growth_family(family)
                    continue
                try:
                    self.run_family(family)
                except Exception as error:
                    failed += 1
                    self._not_run(family, "failed", f"{type(error).__name__}: {error}")
        self.records = [_median_run(runs) for runs in self._runs.values()]
        if self.args.repeat > 1:
            print(f"\nMedian of {self.args.repeat} runs per case (by rate):\n{report.table(self.records)}")
        return 1 if failed else 0

    def meta(self) -> dict[str, Any]:
        has_uvloop = _version("uvloop") is not None
        return {
            "command": " ".join(["scripts/bench", *sys.argv[1:]]),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "grpcio": _version("grpcio"),
            "protobuf": _version("protobuf"),
            "loops": {
                "ours": "uvloop" if has_uvloop else "asyncio",
                "bare": "uvloop" if has_uvloop else "asyncio",
                "load": "uvloop" if has_uvloop else "asyncio",
                "sdk": "uvloop" if self.args.sdk_uvloop else "asyncio",
            },
            "sdk": SDK_REQUIREMENT,
            "duration_seconds": self.args.duration,
            "warmup_seconds": self.args.warmup,
            "concurrency": self.args.concurrency,
            "repeat": self.args.repeat,
            "send_slice_seconds": self.args.slice,
            "send_settle_seconds": measure.SETTLE_SECONDS,
            "send_cycles": self.settings.cycles,  # per run
            "load_processes": self.args.load_procs,
            "server_cpus": sorted(self.server_cpus) if self.server_cpus else "any",
            "load_cpus": sorted(self.load_cpus) if self.load_cpus else "any",
            "channels_per_load_process": self.args.channels,
            "stream_concurrency": self.args.stream_concurrency,
            "stream_chunks": CHUNKS,
            "subscribers": self.args.subscribers,
            "memory_tasks": self.args.memory_tasks,
            "growth_sizes": self.args.growth_sizes,
            "growth_calls_per_measure": self.args.growth_calls,
            "replica_channels_per_load_process": max(self.args.channels, REPLICA_CHANNELS),
            "replica_tick_rate": TICK_RATE,
            "postgres": self.databases.description,
            "push_receiver_cpus": "any" if self.load_cpus is None else "the load workers' CPUs",
            "push_events_per_task": ECHO_EVENTS,
            "push_drain_limit_seconds": DRAIN_LIMIT_SECONDS,
            "push_stall_seconds": STALL_SECONDS,
        }

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.databases.close()
        self._scratch.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        status = bench.run()
    finally:
        bench.close()
    out = Path(args.out)
    meta = bench.meta()
    report.write_json(out, meta, bench.records, args.concurrency, bench.notes, bench.growth_records)
    print(report.summary(bench.records, args.concurrency, bench.notes))
    if bench.growth_records:
        print(growth_report.write(bench.growth_records, out))
    print(f"\nresults written to {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
