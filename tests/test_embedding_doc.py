"""The examples of docs/embedding.md run as written, as scripts of their own: the `async with` one to its end, the
`run(...)` one until SIGINT, which stops it gracefully (its fixed ports replaced with free ones)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from process import START_SECONDS, child_env, free_port
from test_readme import fenced_blocks

from bench.launch import wait_serving as wait_until_serving

RUN_SECONDS = 60.0


def example(title: str) -> str:
    [block] = fenced_blocks(title, "python")
    return "\n".join(block) + "\n"


def test_the_async_with_example_serves_and_stops(tmp_path: Path) -> None:
    (tmp_path / "embedded.py").write_text(example("Serving within an application"))
    done = subprocess.run(
        [sys.executable, "embedded.py"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "serving on port" in done.stdout
    assert done.stdout.rstrip().endswith("HELLO")


def test_the_script_example_serves_until_sigint_then_stops_gracefully(tmp_path: Path) -> None:
    grpc_target, http_target = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    source = example("From a script").replace("127.0.0.1:50051", grpc_target).replace("127.0.0.1:8080", http_target)
    (tmp_path / "script.py").write_text(source)
    log = tmp_path / "script.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "script.py"], cwd=tmp_path, env=child_env(), stdout=output, stderr=subprocess.STDOUT
        )
        try:
            wait_until_serving(process, grpc_target, START_SECONDS, log.read_text)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=RUN_SECONDS) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    written = log.read_text()
    assert f"serving A2A on {grpc_target}" in written
    assert "stopped: 0 task(s)" in written
    assert "Traceback" not in written
