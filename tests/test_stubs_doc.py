"""The README's "Calling it from your own stubs", run as written, in a copy of the checkout's sources.

Its ```sh blocks run (bash, `set -euo pipefail`) in a directory of the test's own that holds what a checkout
has of the package (its sources, protos and pyproject): the first makes a fresh virtualenv, installs
grpcio-tools and googleapis-common-protos from the package index, and generates the stubs with the `-I`
directories it names; the second installs the package into that virtualenv. Then its Python example runs
with that virtualenv's Python and those stubs against a demo server: through the sync client interceptor, the
call succeeds, the extension echo comes back from a unary call and from a stream, and two refused calls raise
their typed errors, with the ErrorInfo's metadata and the BadRequest's fields.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from process import REPO, serve_process
from test_readme import DEFAULT_LISTEN, fenced_blocks, shell_lines

INSTALL_SECONDS = 600  # a fresh venv and two packages (and their dependencies) from the index; then the package
CHECKOUT = ("pyproject.toml", "README.md", "LICENSE", "a2a_grpc", "interceptors", "protos")  # what pip install . reads
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


def copy_checkout(into: Path) -> None:
    """What the package's install reads from the checkout, without this test run's venv and caches."""
    into.mkdir()
    for name in CHECKOUT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, into / name)


def run_shell(title: str, cwd: Path) -> None:
    done = run(["bash", "-euo", "pipefail", "-c", "\n".join(shell_lines(title))], cwd, INSTALL_SECONDS)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"


@pytest.mark.timeout(2 * INSTALL_SECONDS + 3 * RUN_SECONDS)
def test_the_documented_stubs_are_generated_in_a_fresh_venv_and_call_a_real_server(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    copy_checkout(checkout)
    run_shell("Generate the stubs", checkout)
    assert {"a2a_pb2.py", "a2a_pb2.pyi", "a2a_pb2_grpc.py"} <= {path.name for path in (checkout / "stubs").iterdir()}
    python = str(checkout / "v" / "bin" / "python")
    alone = run([python, "-c", "import a2a_grpc"], tmp_path, RUN_SECONDS)
    assert alone.returncode != 0, "the fresh venv must not see the package before the README installs it"

    run_shell("Call the server", checkout)
    [example] = fenced_blocks("Call the server", "python")
    with serve_process(tmp_path / "server") as server:
        script = tmp_path / "call.py"  # beside the checkout: its a2a_grpc/ is not what the example imports
        script.write_text("\n".join(example).replace(DEFAULT_LISTEN, server.ports.grpc_target))
        called = run([python, str(script)], tmp_path, RUN_SECONDS, PYTHONPATH=str(checkout / "stubs"))
    assert called.returncode == 0, called.stderr
    printed = called.stdout.splitlines()
    assert printed[:4] == [
        "TASK_STATE_COMPLETED",
        f"('{RESUME}',)",  # the echo of the unary call, from its trailers
        "['task', 'artifact_update', 'status_update']",
        f"('{RESUME}',)",  # ... and of the stream, from its headers
    ]
    assert printed[4] == "NOT_FOUND TASK_NOT_FOUND {'taskId': 'no-such-task'}"
    assert printed[5].startswith("INVALID_ARGUMENT INVALID_PARAMS [")
    assert "'message.parts'" in printed[5]
    assert len(printed) == 6
