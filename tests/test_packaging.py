"""The installed wheel, not the source tree: our interceptors ship as `a2a_grpc.interceptors`, so an
application with a top-level `interceptors` package of its own can still import and run our server.

A wheel is built from a copy of the repository (so the build neither writes `build/` or egg-info into
the working tree nor picks up stale files from them) and installed into a throwaway venv. That venv
sees the project's dependencies through a `.pth` file naming this interpreter's site-packages; the
`.pth` files *in* that directory (the editable install's finder among them) are not processed, so
`a2a_grpc` can only come from the wheel, which the application checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_SECONDS = 300.0
STEP_SECONDS = 120.0  # creating the venv, installing the wheel, running the application

# Top-level entries of the repository a wheel is not built from.
NOT_COPIED = frozenset(
    {".git", ".venv", ".bench-venv-sdk", "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)

APP_INTERCEPTORS_INIT = (
    '"""The application\'s own interceptors, named like our old top-level package."""\n\nOWNER = "app"\n'
)
APP_INTERCEPTORS_LOGGING = '"""An interceptor module of the application."""\n\nNAME = "app logging interceptor"\n'

APP_SCRIPT = textwrap.dedent(
    '''
    """An application with an `interceptors` package of its own that serves and calls an A2A agent."""

    import asyncio
    import json

    import interceptors
    import interceptors.logging

    # With the old layout (our interceptors as a top-level package) this failed:
    # No module named 'interceptors.server', as `interceptors` is already the application's.
    from a2a_grpc.server import A2AServer, ServerSettings
    from a2a_grpc.client import A2AClient
    from a2a_grpc.generated import a2a_pb2

    import a2a_grpc
    import a2a_grpc.interceptors
    import a2a_grpc.interceptors.server


    async def main() -> None:
        server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory"))
        await server.start()
        try:
            async with A2AClient(server.grpc_target, timeout=30) as client:
                result = await client.send_message("hello from the app")
        finally:
            await server.stop(grace=1)
        task = result.value.task
        print(
            json.dumps(
                {
                    "state": a2a_pb2.TaskState.Name(task.status.state),
                    "artifact_text": [part.text for artifact in task.artifacts for part in artifact.parts],
                    "app_interceptors_owner": interceptors.OWNER,
                    "app_interceptors": interceptors.__file__,
                    "app_interceptors_logging": interceptors.logging.__file__,
                    "a2a_grpc": a2a_grpc.__file__,
                    "a2a_grpc_interceptors": a2a_grpc.interceptors.__file__,
                    "a2a_grpc_interceptors_server": a2a_grpc.interceptors.server.__file__,
                }
            )
        )


    asyncio.run(asyncio.wait_for(main(), 60))
    '''
).lstrip()


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    site_packages: Path


def _run(
    cmd: list[str], *, timeout: float, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _check(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _isolated_env() -> dict[str, str]:
    """This environment without anything that would put the source tree (or another venv) on sys.path."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith(("A2A_GRPC_", "PIP_"))}
    env.update(PYTHONNOUSERSITE="1", PYTHONUNBUFFERED="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _copy_source(dest: Path) -> Path:
    def ignore(directory: str, names: list[str]) -> set[str]:
        top_level = Path(directory).resolve() == ROOT
        return {n for n in names if n == "__pycache__" or n.endswith(".egg-info") or (top_level and n in NOT_COPIED)}

    # symlinks=True keeps a2a_grpc/interceptors a (relative) link, as in the repository.
    shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
    return dest


def _dependency_dirs() -> list[str]:
    """Where this interpreter (the project's venv) finds the project's dependencies."""
    dirs = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return [d for i, d in enumerate(dirs) if d not in dirs[:i] and Path(d).is_dir()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The project's wheel, installed into a fresh venv that sees only the dependencies besides it."""
    tmp = tmp_path_factory.mktemp("packaging")
    env = _isolated_env()

    source = _copy_source(tmp / "source")
    wheels = tmp / "wheels"
    _check(
        _run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(wheels)],
            timeout=BUILD_SECONDS,
            env=env,
        )
    )
    (wheel,) = wheels.glob("a2a_grpc-*.whl")

    venv = tmp / "venv"
    _check(_run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=STEP_SECONDS, env=env))
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    query = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site_packages = Path(_check(_run([str(python), "-c", query], timeout=STEP_SECONDS, env=env)).strip())
    # Appended after the venv's own site-packages; .pth files inside these directories are not processed.
    (site_packages / "a2a_grpc_test_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")

    # pip itself comes from the dependency directories; --ignore-installed so it neither counts the
    # project's editable install as already there nor tries to remove it.
    install = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel)]
    _check(_run(install, timeout=STEP_SECONDS, env=env))
    return Installed(wheel=wheel, python=python, site_packages=site_packages.resolve())


def test_wheel_ships_interceptors_inside_the_package(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert not [n for n in names if n.startswith("interceptors/")], "a top-level interceptors package is in the wheel"
    assert "a2a_grpc/interceptors/__init__.py" in names
    assert "a2a_grpc/interceptors/server/__init__.py" in names
    assert "a2a_grpc/interceptors/client/__init__.py" in names
    assert "a2a_grpc/interceptors/py.typed" in names
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(installed.wheel).read(top_level).decode().split() == ["a2a_grpc"]


def test_application_with_own_interceptors_package_runs_installed_server(installed: Installed, tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "interceptors").mkdir(parents=True)
    (app / "interceptors" / "__init__.py").write_text(APP_INTERCEPTORS_INIT)
    (app / "interceptors" / "logging.py").write_text(APP_INTERCEPTORS_LOGGING)
    (app / "app.py").write_text(APP_SCRIPT)

    result = _run([str(installed.python), "app.py"], cwd=app, env=_isolated_env(), timeout=STEP_SECONDS)
    output = _check(result)
    report: dict[str, Any] = json.loads(output.strip().splitlines()[-1])

    def origin(key: str) -> Path:
        return Path(report[key]).resolve()

    assert report["state"] == "TASK_STATE_COMPLETED", report
    assert report["artifact_text"] == ["hello from the app"], report
    assert report["app_interceptors_owner"] == "app"
    app_dir = app.resolve()
    assert origin("app_interceptors") == app_dir / "interceptors" / "__init__.py"
    assert origin("app_interceptors_logging") == app_dir / "interceptors" / "logging.py"
    for key in ("a2a_grpc", "a2a_grpc_interceptors", "a2a_grpc_interceptors_server"):
        assert origin(key).is_relative_to(installed.site_packages), f"{key} came from {report[key]}, not the wheel"
        assert not origin(key).is_relative_to(ROOT), f"{key} came from the source tree: {report[key]}"
    assert origin("a2a_grpc_interceptors") == installed.site_packages / "a2a_grpc" / "interceptors" / "__init__.py"
