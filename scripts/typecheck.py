"""mypy --strict over the package as it installs: interceptors/ is a2a_grpc.interceptors only through
pyproject's package-dir mapping, which mypy, reading folders, cannot follow.

The Python sources of the folders the mypy config names are staged into build/typecheck/ (ignored by git),
with interceptors/ as a2a_grpc/interceptors/; mypy runs there with the same config, keeps its cache there
between runs, and its report names the files of the source tree. Runs at once in one checkout take turns (a lock
file beside the stage), so one never checks a stage the other is rewriting. Run by scripts/typecheck and
tests/test_lint.py: `python scripts/typecheck.py [MYPY_OPTION...]`.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "typecheck"
CONFIG = "pyproject.toml"
MAPPED = {"interceptors": "a2a_grpc/interceptors"}  # source folder: where the installed package has it
NOT_READ = frozenset({"__pycache__", "site-packages", "node_modules"})  # besides dot names: what mypy skips in a folder
STAGED_MAPPED = {re.compile(f"^{re.escape(staged)}/", re.MULTILINE): f"{source}/" for source, staged in MAPPED.items()}


def _mypy_folders() -> list[str]:
    with (ROOT / CONFIG).open("rb") as config:
        folders: list[str] = tomllib.load(config)["tool"]["mypy"]["files"]
    return folders


def _not_python_source(directory: str, names: list[str]) -> set[str]:
    def kept(name: str) -> bool:
        if name in NOT_READ or name.startswith("."):
            return False
        return (Path(directory) / name).is_dir() or name.endswith((".py", ".pyi"))

    return {name for name in names if not kept(name)}


def stage() -> None:
    """Copy the sources afresh (with their times, so mypy's cache stays valid) in the installed layout."""
    layout = {folder: folder for folder in _mypy_folders()} | MAPPED
    for staged in {path.split("/")[0] for path in layout.values()}:
        shutil.rmtree(STAGE / staged, ignore_errors=True)
    for source, staged in layout.items():
        shutil.copytree(ROOT / source, STAGE / staged, ignore=_not_python_source)
    shutil.copy2(ROOT / CONFIG, STAGE / CONFIG)


def source_paths(report: str) -> str:
    for staged, source in STAGED_MAPPED.items():
        report = staged.sub(source, report)
    return report


def main(mypy_options: list[str]) -> int:
    STAGE.mkdir(parents=True, exist_ok=True)
    with (STAGE.parent / "typecheck.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        stage()
        result = subprocess.run(
            [sys.executable, "-m", "mypy", *mypy_options], cwd=STAGE, capture_output=True, text=True, check=False
        )
    sys.stdout.write(source_paths(result.stdout))
    sys.stderr.write(source_paths(result.stderr))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
