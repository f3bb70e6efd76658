"""The chaos harness's CI profile (`scripts/chaos --profile ci`, fixed seed) as part of the suite: real server
processes, cut calls, injected faults, every invariant checked (bench.chaos). The replicas scenario needs
PostgreSQL's server binaries, as the PostgreSQL store tests do."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import postgres_missing
from process import REPO, child_env

from bench.chaos.scenarios import SCENARIOS
from bench.pg_cluster import find_bindir, not_found_reason

SEED = 1
HARNESS_SECONDS = 900  # the profile takes about 2 minutes on a quiet machine
ONE_SERVER = [scenario.name for scenario in SCENARIOS if scenario.replicas == 1]
REPLICAS = [scenario.name for scenario in SCENARIOS if scenario.replicas > 1]


def run_chaos(scenarios: list[str]) -> None:
    only = [argument for name in scenarios for argument in ("--scenario", name)]
    command = [sys.executable, "-m", "bench.chaos", "--profile", "ci", "--seed", str(SEED), *only]
    result = subprocess.run(
        command, cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=HARNESS_SECONDS, check=False
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr[-4000:]}"
    assert summary.startswith(f"chaos: seed {SEED}, profile ci: ") and ", 0 violations;" in summary, summary


@pytest.mark.timeout(HARNESS_SECONDS + 60)
def test_the_ci_profile_finds_no_violation_on_single_servers() -> None:
    run_chaos(ONE_SERVER)


@pytest.mark.timeout(HARNESS_SECONDS + 60)
def test_the_ci_profile_finds_no_violation_on_replicas_under_faults() -> None:
    if find_bindir() is None:
        postgres_missing(not_found_reason())
    run_chaos(REPLICAS)
