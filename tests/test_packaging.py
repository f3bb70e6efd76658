"""The package as installed, not the source tree: the top-level interceptors/ folder ships as
`a2a_grpc.interceptors` (pyproject's package-dir mapping, no symlink), so an application with a top-level
`interceptors` package of its own can still import and run our server.

Three installs, each into a throwaway venv: a wheel, an sdist (built by setuptools' build backend; pip
builds the wheel it installs), and an editable install. Each is built from a copy of the repository (so
the build neither writes `build/` or egg-info into the working tree nor picks up stale files from them).
A venv sees the project's dependencies through a `.pth` file naming this interpreter's site-packages; the
`.pth` files *in* that directory (the project's own editable finder among them) are not processed, so
`a2a_grpc` can only come from the install under test, which the application checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_SECONDS = 300.0
STEP_SECONDS = 120.0  # creating a venv, installing into it, running the application

# Top-level entries of the repository a package is not built from (the test venvs are large).
NOT_COPIED = frozenset(
    {
        ".git",
        ".venv",
        ".bench-venv-sdk",
        ".test-venv-sdk03",
        ".test-venv-sdk-signing",
        ".hypothesis",
        "build",
        "dist",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
NEVER_COPIED = frozenset({"__pycache__", "node_modules"})

# Each source folder, and where the installed package has it.
LAYOUT = {"a2a_grpc": "a2a_grpc", "interceptors": "a2a_grpc/interceptors"}
DATA_SUFFIXES = (".pyi", ".json", "py.typed")  # what the package ships besides its modules
INSTALLS = ("wheel", "sdist", "editable")

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


# Prints where the import system finds each module (by name) and package resource (package, name) given.
PROBE = textwrap.dedent(
    """
    import importlib.resources, importlib.util, json, sys

    modules, resources = json.loads(sys.argv[1])
    print(json.dumps({
        "modules": [importlib.util.find_spec(name).origin for name in modules],
        "resources": [str(importlib.resources.files(package) / name) for package, name in resources],
    }))
    """
).lstrip()


@dataclass(frozen=True)
class Venv:
    python: Path
    site_packages: Path


@dataclass(frozen=True)
class Installed:
    kind: str
    venv: Venv
    root: Path  # where the install's files are: site-packages, or the source copy of an editable install

    def location(self, installed: str, source: str) -> Path:
        """Where a file of the package is, by its installed and its source path."""
        return self.root / (source if self.kind == "editable" else installed)


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
        return {n for n in names if n in NEVER_COPIED or n.endswith(".egg-info") or (top_level and n in NOT_COPIED)}

    # symlinks=True copies a link as a link (the package folders hold none: see the test below), not what it names.
    shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
    return dest


def _shipped_files() -> dict[str, str]:
    """Every module and data file of the package, by its path in an install: its path in the source tree."""
    shipped = {}
    for folder, installed_as in LAYOUT.items():
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.name.endswith((".py", *DATA_SUFFIXES)):
                relative = path.relative_to(ROOT / folder).as_posix()
                shipped[f"{installed_as}/{relative}"] = f"{folder}/{relative}"
    return shipped


def _dependency_dirs() -> list[str]:
    """Where this interpreter (the project's venv) finds the project's dependencies."""
    dirs = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    return [d for i, d in enumerate(dirs) if d not in dirs[:i] and Path(d).is_dir()]


def _fresh_venv(path: Path) -> Venv:
    """A venv that sees only the project's dependencies besides what is installed into it."""
    env = _isolated_env()
    _check(_run([sys.executable, "-m", "venv", "--without-pip", str(path)], timeout=STEP_SECONDS, env=env))
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    query = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site_packages = Path(_check(_run([str(python), "-c", query], timeout=STEP_SECONDS, env=env)).strip())
    # Appended after the venv's own site-packages; .pth files inside these directories are not processed.
    (site_packages / "a2a_grpc_test_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")
    return Venv(python=python, site_packages=site_packages.resolve())


def _pip_install(venv: Venv, *target: str) -> None:
    # pip and setuptools come from the dependency directories; --ignore-installed so pip neither counts the
    # project's editable install as already there nor tries to remove it.
    install = ["-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation", "--ignore-installed"]
    _check(_run([str(venv.python), *install, *target], timeout=BUILD_SECONDS, env=_isolated_env()))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("packaging")


@pytest.fixture(scope="module")
def wheel(workspace: Path) -> Path:
    source = _copy_source(workspace / "wheel-source")
    wheels = workspace / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(wheels)]
    _check(_run(build, timeout=BUILD_SECONDS, env=_isolated_env()))
    (built,) = wheels.glob("a2a_grpc-*.whl")
    return built


@pytest.fixture(scope="module")
def sdist(workspace: Path) -> Path:
    source = _copy_source(workspace / "sdist-source")
    sdists = workspace / "sdists"
    build = "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])"
    _check(_run([sys.executable, "-c", build, str(sdists)], cwd=source, timeout=BUILD_SECONDS, env=_isolated_env()))
    (built,) = sdists.glob("a2a_grpc-*.tar.gz")
    return built


@pytest.fixture(scope="module", params=INSTALLS)
def installed(request: pytest.FixtureRequest, workspace: Path) -> Installed:
    kind: str = request.param
    venv = _fresh_venv(workspace / f"{kind}-venv")
    if kind == "editable":
        source = _copy_source(workspace / "editable-source")
        _pip_install(venv, "--editable", str(source))
        return Installed(kind=kind, venv=venv, root=source)
    _pip_install(venv, str(request.getfixturevalue(kind)))
    return Installed(kind=kind, venv=venv, root=venv.site_packages)


def test_pyproject_lists_every_package_folder() -> None:
    """setuptools installs the listed packages only: a package folder missing from the list is not installed."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"a2a_grpc.interceptors": "interceptors"}
    folders = {
        (PurePosixPath(installed_as) / init.parent.relative_to(ROOT / folder).as_posix()).as_posix().replace("/", ".")
        for folder, installed_as in LAYOUT.items()
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == folders


def test_package_folders_hold_no_symlink() -> None:
    """interceptors/ is a2a_grpc.interceptors by pyproject's mapping alone, not by a link into a2a_grpc/."""
    links = [path for folder in LAYOUT for path in (ROOT / folder).rglob("*") if path.is_symlink()]
    assert not links


def test_wheel_ships_interceptors_inside_the_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("interceptors/")], "a top-level interceptors package is in the wheel"
    assert sorted(n for n in names if n.startswith("a2a_grpc/")) == sorted(_shipped_files())
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["a2a_grpc"]


def test_sdist_carries_the_interceptors_folder_and_no_symlink(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        members = archive.getmembers()
    assert not [m.name for m in members if not (m.isfile() or m.isdir())], "the sdist holds a link"
    names = {m.name.split("/", 1)[1] for m in members if m.isfile()}  # without the a2a_grpc-VERSION/ folder
    assert not [n for n in names if n.startswith("a2a_grpc/interceptors/")]
    missing = sorted(set(_shipped_files().values()) - names)
    assert not missing, f"not in the sdist: {missing}"


def test_every_module_and_data_file_is_installed(installed: Installed, tmp_path: Path) -> None:
    """The install's import system finds each module and data file of the source tree where it belongs."""
    shipped = _shipped_files()
    modules = [p for p in shipped if p.endswith(".py")]
    resources = [p for p in shipped if not p.endswith(".py")]
    names = [p.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for p in modules]
    in_packages = [[folder.replace("/", "."), name] for folder, _, name in (p.rpartition("/") for p in resources)]
    # away from the source tree: `-c` puts the working directory on sys.path
    probe = [str(installed.venv.python), "-c", PROBE, json.dumps([names, in_packages])]
    output = _check(_run(probe, cwd=tmp_path, timeout=STEP_SECONDS, env=_isolated_env()))
    found: dict[str, list[str]] = json.loads(output.strip().splitlines()[-1])

    for path, origin in zip(modules + resources, found["modules"] + found["resources"], strict=True):
        assert Path(origin).resolve() == installed.location(path, shipped[path]).resolve(), path
        assert Path(origin).is_file(), path


def test_application_with_own_interceptors_package_runs_installed_server(installed: Installed, tmp_path: Path) -> None:
    app = tmp_path / "app"
    (app / "interceptors").mkdir(parents=True)
    (app / "interceptors" / "__init__.py").write_text(APP_INTERCEPTORS_INIT)
    (app / "interceptors" / "logging.py").write_text(APP_INTERCEPTORS_LOGGING)
    (app / "app.py").write_text(APP_SCRIPT)

    result = _run([str(installed.venv.python), "app.py"], cwd=app, env=_isolated_env(), timeout=STEP_SECONDS)
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
    expected = {
        "a2a_grpc": ("a2a_grpc/__init__.py", "a2a_grpc/__init__.py"),
        "a2a_grpc_interceptors": ("a2a_grpc/interceptors/__init__.py", "interceptors/__init__.py"),
        "a2a_grpc_interceptors_server": ("a2a_grpc/interceptors/server/__init__.py", "interceptors/server/__init__.py"),
    }
    for key, (installed_path, source_path) in expected.items():
        assert origin(key) == installed.location(installed_path, source_path).resolve(), report[key]
        assert not origin(key).is_relative_to(ROOT), f"{key} came from the source tree: {report[key]}"
