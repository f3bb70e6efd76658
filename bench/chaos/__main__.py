"""`python -m bench.chaos` (scripts/chaos): run the chaos scenarios, print one summary line, exit 1 on any
violation (each listed above the summary, with the seed that reproduces the run)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos.ledger import Ledger
from bench.chaos.rounds import ScenarioRun
from bench.chaos.scenarios import SCENARIOS, Scenario

# profile -> (seconds per scenario, at least this many rounds each): CI's is short and fixed
PROFILES = {"ci": (12.0, 4), "soak": (360.0, 4)}


async def run(scenarios: list[Scenario], seed: int, seconds: float, min_rounds: int, workdir: Path) -> Ledger:
    ledger = Ledger()
    for scenario in scenarios:
        directory = workdir / scenario.name
        directory.mkdir()
        chaos = ScenarioRun(scenario, seed, directory, ledger)
        try:
            await chaos.start()
            deadline = time.monotonic() + seconds
            number = 0
            while number < min_rounds or time.monotonic() < deadline:
                await chaos.round(number)
                number += 1
            await chaos.finish()
        finally:
            await chaos.stop()
        hooks = f", webhook answered {chaos.webhook.answered}" if chaos.webhook is not None else ""
        print(f"chaos: {scenario.name}: {chaos.rounds} rounds, {_rss(chaos)}{hooks}", file=sys.stderr)
    print(f"chaos: status codes {dict(ledger.codes.most_common())}", file=sys.stderr)
    return ledger


def _rss(chaos: ScenarioRun) -> str:
    parts = [
        f"{name} RSS {chaos.rss_first[name] >> 20}->{chaos.rss_last[name] >> 20} MiB"
        for name in sorted(chaos.rss_first)
    ]
    return ", ".join(parts)


def summary(ledger: Ledger, seed: int, length: str, seconds: float) -> str:
    """The one line a run ends with; `length` says how long it was asked to run ("profile ci", "1800 s")."""
    latencies = sorted(ledger.health_latencies)
    p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan")
    median = statistics.median(latencies) * 1000 if latencies else float("nan")
    return (
        f"chaos: seed {seed}, {length}: {ledger.calls} calls ({ledger.cuts} cut by the client), "
        f"{ledger.faults} faults injected, {ledger.violation_count} violations; health p50 {median:.1f} ms, "
        f"p99 {p99:.1f} ms; {seconds:.0f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci", help="ci: about 2 minutes (default)")
    parser.add_argument(
        "--duration", type=float, help="seconds in all, shared by the scenarios (overrides the profile's)"
    )
    parser.add_argument("--seed", type=int, default=1, help="the seed every random choice derives from (default 1)")
    parser.add_argument(
        "--scenario", action="append", choices=[s.name for s in SCENARIOS], help="run only these (repeatable)"
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="a new directory for the servers' logs and stores, kept"
    )
    args = parser.parse_args(argv)
    scenarios = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    seconds, min_rounds = PROFILES[args.profile]
    if args.duration is not None:
        seconds = args.duration / len(scenarios)
    began = time.monotonic()
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        ledger = asyncio.run(run(scenarios, args.seed, seconds, min_rounds, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="a2a-chaos-") as workdir:
            ledger = asyncio.run(run(scenarios, args.seed, seconds, min_rounds, Path(workdir)))
    for violation in ledger.violations:
        print(f"violation: {violation}")
    length = f"profile {args.profile}" if args.duration is None else f"{args.duration:g} s"
    if ledger.violation_count:
        only = "".join(f" --scenario {s.name}" for s in scenarios) if args.scenario else ""
        how_long = f"--profile {args.profile}" if args.duration is None else f"--duration {args.duration:g}"
        print(f"reproduce: scripts/chaos {how_long} --seed {args.seed}{only}")
    print(summary(ledger, args.seed, length, time.monotonic() - began))
    return 1 if ledger.violation_count else 0


if __name__ == "__main__":
    sys.exit(main())
