"""The README's "Calling it from your own stubs", run as written, with nothing of the checkout but its protos.

Its ```sh block runs (bash, `set -euo pipefail`) in a directory of the test's own that links `protos` to the
checkout's: it makes a fresh virtualenv, installs grpcio-tools and googleapis-common-protos from the package
index, and generates the stubs with the `-I` directories it names. Then its Python example runs with that
virtualenv's Python and those stubs alone (the package itself is not importable there) against a demo
server: the call succeeds, the extension echo comes back in the trailers, and the ErrorInfo and BadRequest
of two refused calls are decoded from `grpc-status-details-bin`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from process import REPO, serve_process
from test_readme import DEFAULT_LISTEN, fenced_blocks, shell_lines

INSTALL_SECONDS = 600  # a fresh venv and two packages (and their dependencies) from the index
RUN_SECONDS = 60
RESUME = "https://github.com/a2a-grpc/a2a-grpc/extensions/stream-resume/v1"


def outside_env(**extra: str) -> dict[str, str]:
    """This environment without the checkout on PYTHONPATH and without any A2A_GRPC_* setting."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("A2A_GRPC_") and k not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    return {**env, **extra}


def run(command: list[str], cwd: Path, timeout: float, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=outside_env(**extra), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.timeout(INSTALL_SECONDS + 3 * RUN_SECONDS)
def test_the_documented_stubs_are_generated_in_a_fresh_venv_and_call_a_real_server(tmp_path: Path) -> None:
    (tmp_path / "protos").symlink_to(REPO / "protos")
    lines = shell_lines("Generate the stubs")
    generated = run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], tmp_path, INSTALL_SECONDS)
    assert generated.returncode == 0, f"{generated.stdout}\n{generated.stderr}"
    assert {"a2a_pb2.py", "a2a_pb2.pyi", "a2a_pb2_grpc.py"} <= {path.name for path in (tmp_path / "stubs").iterdir()}

    python = str(tmp_path / "v" / "bin" / "python")
    alone = run([python, "-c", "import a2a_grpc"], tmp_path, RUN_SECONDS, PYTHONPATH="stubs")
    assert alone.returncode != 0, "the fresh venv must not see the package: the example would prove nothing"

    [example] = fenced_blocks("Call the server", "python")
    with serve_process(tmp_path / "server") as server:
        script = tmp_path / "call.py"
        script.write_text("\n".join(example).replace(DEFAULT_LISTEN, server.ports.grpc_target))
        called = run([python, str(script)], tmp_path, RUN_SECONDS, PYTHONPATH="stubs")
    assert called.returncode == 0, called.stderr
    printed = called.stdout.splitlines()
    assert printed[:2] == ["TASK_STATE_COMPLETED", RESUME]  # the call, and the echo from the trailers
    assert printed[2].startswith("NOT_FOUND ")
    assert printed[3].startswith('ErrorInfo reason: "TASK_NOT_FOUND"')
    assert 'key: "taskId" value: "no-such-task"' in printed[3]
    assert printed[4].startswith("INVALID_ARGUMENT ")
    assert printed[5].startswith('ErrorInfo reason: "INVALID_PARAMS"')
    assert printed[6].startswith("BadRequest field_violations { field: ")
    assert 'field: "message.parts"' in printed[6]
    assert len(printed) == 7
