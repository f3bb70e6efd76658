"""`scripts/bench`'s send.http.* cases run end to end (one second, two callers): SendMessage over our JSON-RPC and
HTTP+JSON faces, side by side with send.memory.ext, and (when the SDK's HTTP venv is there, or
A2A_GRPC_BENCH_SDK=1) over the reference SDK's own JSON-RPC and REST servers. Not a performance test: it checks
that every case ran against a real server with no error, and that the ratios are reported."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.sdk_env import BENCH_SDK_HTTP

ROOT = Path(__file__).resolve().parent.parent
SWITCH = os.environ.get("A2A_GRPC_BENCH_SDK")
WITH_SDK = BENCH_SDK_HTTP.installed(ROOT) if SWITCH is None else SWITCH == "1"
OURS = ("send.http.jsonrpc.ours", "send.http.rest.ours", "send.memory.ext")
SDK = ("send.http.jsonrpc.sdk", "send.http.rest.sdk")


@pytest.mark.timeout(600)
def test_the_http_send_cases_run_side_by_side_with_the_grpc_one(tmp_path: Path) -> None:
    families = OURS + (SDK if WITH_SDK else ())
    out = tmp_path / "results.json"
    argv = ["bash", str(ROOT / "scripts" / "bench"), f"--cases={','.join(families)}", "--concurrency=2"]
    argv += ["--quick", "--duration=1", "--warmup=0.2", f"--out={out}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads(out.read_text())
    cases = {case["name"]: case for case in document["cases"]}
    assert sorted(cases) == sorted(f"{family}@2" for family in families)
    for name, case in cases.items():
        assert "failed" not in case and case["errors"] == 0, (name, case.get("first_error"), case.get("failed"))
        assert case["completed"] > 0 and case["rate"] > 0, name
    ratios = {ratio["ratio"] for ratio in document["ratios"]}
    assert {"send.http.jsonrpc.ours@2 / send.memory.ext", "send.http.rest.ours@2 / send.memory.ext"} <= ratios
    if WITH_SDK:
        assert {"send.http.jsonrpc.ours@2 / sdk", "send.http.rest.ours@2 / sdk"} <= ratios
        targets = {target["target"] for target in document["targets"]}
        assert {"send.http.jsonrpc.ours@2 >= 3x sdk", "send.http.rest.ours@2 >= 3x sdk"} <= targets
