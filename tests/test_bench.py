"""`scripts/bench` runs end to end (one second per case, tiny concurrency), so it does not rot.

Not a performance test: it checks that every case ran against a real server and produced sane
numbers, never how fast anything was.

The reference SDK's cases need the SDK's own venv, which the bench installs from the package index the
first time: they run when A2A_GRPC_BENCH_SDK=1 (installing it if need be), or when that venv is there
already and A2A_GRPC_BENCH_SDK is not 0. The other cases always run, offline. The replicas.* cases need
PostgreSQL: they run as the PostgreSQL store tests do (the `postgres_server` fixture), on the bench's own
throwaway cluster, or on $A2A_GRPC_TEST_POSTGRES_URL when set. The push.* cases run offline too: their webhook
receiver is the bench's own, on 127.0.0.1. So do the telemetry.* cases (tracing with the `otel` extra, which the
test environment installs, exported nowhere), and the auth.* cases (their keys and certificates made for the run).
The growth.* cases run on tiny stores (GROWTH_TASKS), their loaded stores cached in the test's own directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import databases, growth, growth_load, run
from bench.pg_cluster import PostgresUnavailable
from bench.sdk_env import sdk_installed

ROOT = Path(__file__).resolve().parent.parent


def _with_sdk() -> bool:
    switch = os.environ.get("A2A_GRPC_BENCH_SDK")
    return sdk_installed(ROOT) if switch is None else switch == "1"


WITH_SDK = _with_sdk()
CONCURRENCY = (1, 2)
SEND_FAMILIES = (
    "send.bare",
    "send.bare-asks",  # send.bare asking gRPC what our chain asks
    "send.bare.interceptor",  # send.bare behind the standard A2AServerInterceptor
    "send.sdk",
    "send.memory.ext",
    "send.memory.ext-headers",
    "send.memory.noext",
    "send.memory.v03",  # send.memory.ext's server, called on its A2A 0.3 face
    "send.memory.v03-noext",  # send.memory.noext's, likewise
    "send.sqlite.ext",
    "send.sqlite.noext",
)
OTHER_CASES = ("stream.bare", "stream.sdk", "stream.ours", "fanout.sdk", "fanout.ours", "memory.ours")
MEMORY_TASKS = 300
SUBSCRIBERS = 4
REPLICA_CONCURRENCY = 16  # 8 callers per load process: each opens 8 connections, for both workers to get some
REPLICA_SEND = ("replicas.send.sqlite", "replicas.send.pg", "replicas.send.pg-workers2")
PUSH_CONCURRENCY = 8
TELEMETRY_CONCURRENCY = (2, 4)  # measured at the highest only
TELEMETRY = ("telemetry.send.off", "telemetry.send.on", "telemetry.send.tracing")
AUTH_CONCURRENCY = 4
AUTH = ("auth.send.plain", "auth.send.jwt", "auth.send.tls")
GROWTH_TASKS = 200
GROWTH_CALLS = 5


def _selected(names: tuple[str, ...]) -> list[str]:
    return [name for name in names if WITH_SDK or "sdk" not in name]


def _run_bench(out_dir: Path, *flags: str, timeout: float = 300) -> tuple[dict[str, Any], str]:
    """`scripts/bench --quick` with `flags`, its results written in `out_dir`: the results and what it printed."""
    out = out_dir / "results.json"
    argv = ["bash", str(ROOT / "scripts" / "bench"), *flags, "--quick", "--duration=1", "--warmup=0.2", f"--out={out}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout.partition("\nNotes:")[0][-4000:] + done.stderr[-4000:]
    return json.loads(out.read_text()), done.stdout


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _run_bench(
        tmp_path_factory.mktemp("bench"),
        f"--cases={','.join(_selected(SEND_FAMILIES + OTHER_CASES))}",
        f"--concurrency={','.join(map(str, CONCURRENCY))}",
        "--stream-concurrency=2",
        f"--subscribers={SUBSCRIBERS}",
        f"--memory-tasks={MEMORY_TASKS}",
        timeout=840,
    )


@pytest.fixture(scope="module")
def replicas_run(tmp_path_factory: pytest.TempPathFactory, postgres_server: str) -> tuple[dict[str, Any], str]:
    database = [f"--postgres={postgres_server}"] if os.environ.get("A2A_GRPC_TEST_POSTGRES_URL") else []
    out_dir = tmp_path_factory.mktemp("bench-replicas")
    return _run_bench(out_dir, "--cases=replicas.*", f"--concurrency={REPLICA_CONCURRENCY}", *database)


@pytest.fixture(scope="module")
def push_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _run_bench(tmp_path_factory.mktemp("bench-push"), "--cases=push.*", f"--concurrency={PUSH_CONCURRENCY}")


@pytest.fixture(scope="module")
def telemetry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    concurrency = ",".join(map(str, TELEMETRY_CONCURRENCY))
    return _run_bench(tmp_path_factory.mktemp("bench-telemetry"), "--cases=telemetry.*", f"--concurrency={concurrency}")


@pytest.fixture(scope="module")
def auth_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _run_bench(tmp_path_factory.mktemp("bench-auth"), "--cases=auth.*", f"--concurrency={AUTH_CONCURRENCY}")


def _cases(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {case["name"]: case for case in document["cases"]}


@pytest.mark.timeout(900)
def test_every_case_is_measured(bench_run: tuple[dict[str, Any], str]) -> None:
    cases = _cases(bench_run[0])
    expected = [f"{family}@{c}" for family in _selected(SEND_FAMILIES) for c in CONCURRENCY] + _selected(OTHER_CASES)
    assert sorted(cases) == sorted(expected)
    for name, case in cases.items():
        assert "skipped" not in case and "failed" not in case, (name, case)
        assert case["errors"] == 0, (name, case["first_error"])


@pytest.mark.timeout(900)
def test_throughput_cases_have_sane_numbers(bench_run: tuple[dict[str, Any], str]) -> None:
    for name, case in _cases(bench_run[0]).items():
        if case["kind"] == "memory":
            continue
        assert case["completed"] > 0, name
        assert case["rate"] > 0, name
        assert 0 < case["p50_ms"] <= case["p99_ms"] < 60_000, name
        assert case["server_cpu_us"] is not None and case["server_cpu_us"] >= 0, name
        assert case["window_seconds"] > 0, name
        if case["kind"] == "send":
            assert case["unit"] == "req/s" and case["concurrency"] in CONCURRENCY, name
            # measured in turns, interleaved with the other send cases: a rate and a CPU cost for each turn
            cycles = bench_run[0]["meta"]["send_cycles"] * bench_run[0]["meta"]["repeat"]
            assert len(case["cycle_rates"]) == len(case["cycle_cpu_us"]) == cycles, name
            assert all(rate > 0 for rate in case["cycle_rates"]) and all(case["cycle_cpu_us"]), name
        else:
            assert case["unit"] == "events/s" and case["events"] > 0, name


@pytest.mark.timeout(900)
def test_fanout_delivers_every_event_to_every_subscriber(bench_run: tuple[dict[str, Any], str]) -> None:
    cases = _cases(bench_run[0])
    for name in _selected(("fanout.ours", "fanout.sdk")):
        case = cases[name]
        assert case["concurrency"] == SUBSCRIBERS
        # each round: every subscriber reads the task's events to its end (chunks plus the final status)
        assert case["events"] >= case["rounds"] * SUBSCRIBERS * (bench_run[0]["meta"]["stream_chunks"] + 1), name


@pytest.mark.timeout(900)
def test_memory_case_stores_the_tasks(bench_run: tuple[dict[str, Any], str]) -> None:
    case = _cases(bench_run[0])["memory.ours"]
    assert case["completed"] == MEMORY_TASKS
    assert case["tasks_listed"] == MEMORY_TASKS
    assert case["rss_after_mb"] > 0 and case["rss_idle_mb"] > 0


@pytest.mark.timeout(900)
def test_ratios_and_table_are_reported(bench_run: tuple[dict[str, Any], str]) -> None:
    document, stdout = bench_run
    names = {r["ratio"] for r in document["ratios"]}
    top = max(CONCURRENCY)
    wanted = (
        f"send.memory.ext@{top} / sdk",
        f"send.bare-asks@{top} / bare",
        f"send.bare.interceptor@{top} / bare",
        f"send.sqlite.noext@{top} / bare",
        f"extension overhead send.memory@{top} (1 - ext/noext)",
        f"extension overhead send.sqlite@{top}, server CPU (ext/noext - 1)",
        "stream.ours / stream.bare",
        "stream.ours / stream.sdk",
        "fanout.ours / fanout.sdk",
        f"send.memory.v03@{top} / ext",
        f"send.memory.v03-noext@{top} / noext",
        f"0.3 face overhead send.memory.v03@{top}, server CPU (v03/ext - 1)",
    )
    for ratio in _selected(wanted):
        assert ratio in names
    assert {t["target"] for t in document["targets"]} == {
        f"send.memory.ext@{top} >= 0.75x bare",
        f"extension overhead send.memory@{top} < 5% (server CPU, ext/noext - 1)",
        f"extension overhead send.sqlite@{top} < 5% (server CPU, ext/noext - 1)",
        f"send.memory.v03@{top} >= 0.85x send.memory.ext@{top}",
        f"send.memory.v03-noext@{top} >= 0.85x send.memory.noext@{top}",
    }
    cases = _cases(document)
    assert cases[f"send.memory.v03@{top}"]["face"] == "0.3" and cases[f"send.memory.ext@{top}"]["face"] == "1.0"
    assert len(document["faces"]) == 4  # server CPU per request of each face, each 0.3 case against its 1.0 one
    assert document["load_generator_ceiling"].startswith("load generator ceiling:")
    assert document["meta"]["load_processes"] >= 2
    for line in ("Ratios (measured side by side in this run", "Targets:", "send.memory.ext@1"):
        assert line in stdout


@pytest.mark.timeout(400)
def test_replica_send_cases_are_measured_side_by_side(replicas_run: tuple[dict[str, Any], str]) -> None:
    document = replicas_run[0]
    cases = _cases(document)
    assert sorted(cases) == sorted(
        [f"{family}@{REPLICA_CONCURRENCY}" for family in REPLICA_SEND] + ["replicas.subscribe"]
    )
    cycles = document["meta"]["send_cycles"] * document["meta"]["repeat"]
    own_cluster = not os.environ.get("A2A_GRPC_TEST_POSTGRES_URL")
    for family in REPLICA_SEND:
        case = cases[f"{family}@{REPLICA_CONCURRENCY}"]
        assert "skipped" not in case and "failed" not in case, (family, case)
        assert case["errors"] == 0, (family, case["first_error"])
        assert case["completed"] > 0 and case["rate"] > 0 and len(case["cycle_rates"]) == cycles, family
        assert case["workers"] == (2 if family.endswith("workers2") else 1)
        if case["store"] == "postgres" and own_cluster:  # the bench knows its cluster's processes
            assert case["db_cpu_cores"] > 0 and case["db_cpu_us"] > 0, family
    # every connection the load processes opened was served by one of the two workers
    spread = cases[f"replicas.send.pg-workers2@{REPLICA_CONCURRENCY}"]["connections_per_worker"]
    assert sum(spread) == document["meta"]["replica_channels_per_load_process"] * document["meta"]["load_processes"]
    assert len(spread) == 2


@pytest.mark.timeout(400)
def test_cross_replica_events_all_arrive_in_order(replicas_run: tuple[dict[str, Any], str]) -> None:
    case = _cases(replicas_run[0])["replicas.subscribe"]
    assert case["errors"] == 0, case["first_error"]
    assert case["target_rate"] == 100 and case["expected_events"] == 100  # one second at 100 events/s
    assert case["completed"] == case["expected_events"]
    assert case["seq_gaps"] == 0 and case["out_of_order"] == 0
    assert 0 < case["p50_ms"] <= case["p99_ms"] < 60_000


@pytest.mark.timeout(400)
def test_replica_ratios_and_targets_are_reported(replicas_run: tuple[dict[str, Any], str]) -> None:
    document, stdout = replicas_run
    c = REPLICA_CONCURRENCY
    names = {r["ratio"] for r in document["ratios"]}
    assert {f"replicas.send.pg@{c} / sqlite", f"replicas.send.pg-workers2@{c} / pg"} <= names
    assert {t["target"] for t in document["targets"]} == {
        f"replicas.send.pg@{c} >= 0.6x replicas.send.sqlite@{c}",
        f"replicas.send.pg-workers2@{c} >= 1.3x replicas.send.pg@{c}",
        "replicas.subscribe p99 < 50 ms at 100 events/s, every event in order",
    }
    assert len(document["replicas"]) >= len(REPLICA_SEND)  # where the CPUs went, case by case
    for line in ("connections per worker", "of 100 events published at 100/s arrived", "Targets:"):
        assert line in stdout


def test_postgres_cases_are_skipped_with_one_line_without_postgres(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unavailable(settings: object) -> None:
        raise PostgresUnavailable("PostgreSQL server binaries not found")

    monkeypatch.setattr(databases, "start_cluster", unavailable)
    bench = run.Bench(run.parse_args(["--cases=replicas.*,send.bare"]))
    try:
        assert bench._start_postgres() == 0  # a skip, not a failure
    finally:
        bench.close()
    assert [f.name for f in bench.families] == ["send.bare", "replicas.send.sqlite"]
    lines = [line for line in capsys.readouterr().out.splitlines() if "SKIPPED" in line]
    assert lines == [
        "replicas.send.pg, replicas.send.pg-workers2, replicas.subscribe: SKIPPED: PostgreSQL server binaries not found"
    ]
    assert any("PostgreSQL server binaries not found" in note for note in bench.notes)


@pytest.mark.timeout(400)
def test_push_cases_deliver_every_notification(push_run: tuple[dict[str, Any], str]) -> None:
    document, stdout = push_run
    cases = _cases(document)
    c = PUSH_CONCURRENCY
    assert sorted(cases) == [f"push.send.sqlite.off@{c}", f"push.send.sqlite@{c}"]
    cycles = document["meta"]["send_cycles"] * document["meta"]["repeat"]
    for name, case in cases.items():
        assert "skipped" not in case and "failed" not in case, (name, case)
        assert case["errors"] == 0, (name, case["first_error"])
        assert case["completed"] > 0 and len(case["cycle_rates"]) == cycles, name
        assert case["server_cpu_us_whole"] > 0 and case["calls_succeeded"] >= case["completed"], name
    off = cases[f"push.send.sqlite.off@{c}"]
    assert "push_expected" not in off  # its messages carry no push config
    pushed = cases[f"push.send.sqlite@{c}"]
    # every successful SendMessage made a task whose two events (artifact, COMPLETED status) all arrived
    assert pushed["push_expected_tasks"] == pushed["calls_succeeded"] > 0
    assert pushed["push_notified_tasks"] == pushed["push_expected_tasks"]
    assert pushed["push_expected"] == 2 * pushed["push_expected_tasks"]
    assert pushed["push_missing"] == 0 and pushed["push_missing_runs"] == [0]
    assert pushed["push_distinct"] == pushed["push_expected"]
    assert pushed["push_received"] == pushed["push_distinct"] + pushed["push_duplicates"]
    assert pushed["push_malformed"] == 0 and pushed["push_bad_token"] == 0
    assert pushed["push_events_per_task"] == {"2": pushed["push_expected_tasks"]}
    assert 0 < pushed["push_latency_samples"] <= pushed["push_expected_tasks"]
    assert 0 < pushed["push_p50_ms"] <= pushed["push_p99_ms"] <= pushed["push_max_ms"] < 60_000
    assert pushed["receiver_cpu_cores"] > 0 and pushed["receiver_cpu_us"] > 0
    names = {r["ratio"] for r in document["ratios"]}
    assert {f"push.send.sqlite@{c} / off", f"push overhead push.send.sqlite@{c}, server CPU (push/off - 1)"} <= names
    assert {t["target"] for t in document["targets"]} == {
        f"push.send.sqlite@{c} >= 0.7x push.send.sqlite.off@{c}",
        f"push.send.sqlite@{c}: every notification owed delivered (all runs)",
    }
    assert len(document["push"]) == 3  # where the CPUs went, with and without push; the delivery figures
    for line in ("tasks notified", "delivery p50", "us/notification", "Targets:"):
        assert line in stdout


@pytest.mark.timeout(400)
def test_telemetry_cases_are_measured_side_by_side_with_the_access_log_written(
    telemetry_run: tuple[dict[str, Any], str],
) -> None:
    document, stdout = telemetry_run
    cases = _cases(document)
    c = max(TELEMETRY_CONCURRENCY)
    assert sorted(cases) == sorted(f"{family}@{c}" for family in TELEMETRY)  # the highest concurrency only
    cycles = document["meta"]["send_cycles"] * document["meta"]["repeat"]
    for name, case in cases.items():
        assert "skipped" not in case and "failed" not in case, (name, case)
        assert case["errors"] == 0, (name, case["first_error"])
        assert case["completed"] > 0 and len(case["cycle_rates"]) == cycles, name
        assert case["server_cpu_us"] > 0, name
    assert "access_log_lines" not in cases[f"telemetry.send.off@{c}"]
    for family in ("telemetry.send.on", "telemetry.send.tracing"):  # one JSON line per call, warm-up included
        assert cases[f"{family}@{c}"]["access_log_lines"] >= cases[f"{family}@{c}"]["completed"], family
    names = {r["ratio"] for r in document["ratios"]}
    assert {
        f"telemetry.send.on@{c} / off",
        f"telemetry.send.tracing@{c} / off",
        f"telemetry overhead telemetry.send.on@{c}, server CPU (on/off - 1)",
        f"telemetry overhead telemetry.send.tracing@{c}, server CPU (tracing/off - 1)",
    } <= names
    for ratio in document["ratios"]:
        if ratio["ratio"].endswith(" / off"):
            assert ratio["value"] > 0 and len(ratio["quartiles"]) == 2, ratio
    assert {t["target"] for t in document["targets"]} == {f"telemetry.send.on@{c} >= 0.9x telemetry.send.off@{c}"}
    assert len(document["telemetry"]) == 3  # each case's server CPU per request
    for line in ("JSON lines written", "server CPU per request", "Targets:"):
        assert line in stdout


@pytest.mark.timeout(400)
def test_auth_cases_are_measured_side_by_side_on_servers_refusing_unsecured_calls(
    auth_run: tuple[dict[str, Any], str],
) -> None:
    document, stdout = auth_run
    cases = _cases(document)
    c = AUTH_CONCURRENCY
    assert sorted(cases) == sorted(f"{family}@{c}" for family in AUTH)
    cycles = document["meta"]["send_cycles"] * document["meta"]["repeat"]
    for name, case in cases.items():  # every call carried the token, or went over TLS, and was answered
        assert "skipped" not in case and "failed" not in case, (name, case)
        assert case["errors"] == 0, (name, case["first_error"])
        assert case["completed"] > 0 and len(case["cycle_rates"]) == cycles, name
        assert case["server_cpu_us"] > 0, name
    assert "unsecured_call" not in cases[f"auth.send.plain@{c}"]
    # checked before the load: a call without the token, a call over plaintext
    assert cases[f"auth.send.jwt@{c}"]["unsecured_call"].startswith("UNAUTHENTICATED: ")
    assert cases[f"auth.send.tls@{c}"]["unsecured_call"].startswith("UNAVAILABLE: ")
    ratios = {r["ratio"]: r for r in document["ratios"]}
    for label in ("jwt", "tls"):
        ratio = ratios[f"auth.send.{label}@{c} / plain"]
        assert ratio["value"] > 0 and len(ratio["quartiles"]) == 2, ratio
        assert f"auth overhead auth.send.{label}@{c}, server CPU ({label}/plain - 1)" in ratios
    assert {t["target"] for t in document["targets"]} == {
        f"auth.send.jwt@{c} >= 0.85x auth.send.plain@{c}",
        f"auth.send.tls@{c} >= 0.7x auth.send.plain@{c}",
    }
    assert len(document["auth"]) == 3  # each case's server CPU per request
    for line in ("a call without credentials refused", "server CPU per request", "Targets:"):
        assert line in stdout


def test_instructions_are_counted_per_call_for_each_server() -> None:
    """bench.instructions under valgrind: every server answers its calls (each COMPLETED, or the run fails),
    and ours does more per call than the bare servicer."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: scripts/test installs Debian's valgrind package")
    result = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--calls", "30", "--servers", "bare,memory.ext"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    counts = {
        line.split()[0]: float(line.split()[1].replace(",", ""))
        for line in result.stdout.splitlines()
        if line.endswith("instructions per SendMessage")
    }
    assert set(counts) == {"bare", "memory.ext"}, result.stdout
    assert 0 < counts["bare"] < counts["memory.ext"], counts
    assert "bare / memory.ext" in result.stdout


@pytest.mark.timeout(300)
def test_growth_cases_measure_every_call_and_write_the_table_and_plot(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    flags = ("--cases=growth.memory,growth.sqlite", f"--growth-sizes={GROWTH_TASKS}", f"--cache-dir={cache}")
    document, stdout = _run_bench(tmp_path, *flags, f"--growth-calls={GROWTH_CALLS}")
    records = {record["name"]: record for record in document["growth"]}
    assert sorted(records) == [f"growth.memory@{GROWTH_TASKS}", f"growth.sqlite@{GROWTH_TASKS}"]
    planned = sum(task.owner == "" for task in growth_load.plan(GROWTH_TASKS, 0))
    for name, record in records.items():
        assert "failed" not in record, (name, record)
        assert record["start_seconds"] > 0 and record["load_seconds"] > 0, name
        assert sorted(record["measures"]) == sorted(growth.MEASURES), name
        for measure, figures in record["measures"].items():
            assert figures["calls"] == GROWTH_CALLS and 0 < figures["p50_ms"] <= figures["p99_ms"], (name, measure)
        # the caller's tasks, read through ListTasks' total_size: all the memory store's, its share of the plan's
        expected = GROWTH_TASKS if record["store"] == "memory" else planned
        assert record["caller_tasks"] == expected, name
        assert record["deep_page"] == min(growth.DEEP_PAGES, -(-expected // growth.PAGE_SIZE)), name
    assert len(list(cache.glob("sqlite-*.db"))) == 1  # the loaded SQLite store, kept for the next run
    tables = (tmp_path / "results-growth.md").read_text()
    for measure in growth.MEASURES:
        assert f"| {measure} |" in tables
    assert tables.count("| start-up |") == 2
    assert (tmp_path / "results-growth.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "growth tables and plot written to" in stdout


def test_growth_sqlite_store_is_loaded_once_then_taken_from_the_cache(tmp_path: Path) -> None:
    cache, first, second = tmp_path / "cache", tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    loaded = growth_load.sqlite_store(cache, first, GROWTH_TASKS)
    again = growth_load.sqlite_store(cache, second, GROWTH_TASKS)
    assert loaded.load_seconds is not None and again.load_seconds is None
    assert loaded.url != again.url  # each run serves a copy: a server may write to its store at start
    assert [p.name for p in cache.iterdir()] == [growth_load.cache_path(cache, "sqlite", GROWTH_TASKS).name]
