"""ruff and mypy --strict are part of the suite: a lint or type error fails it like any other test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_is_clean() -> None:
    result = _run("-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run("-m", "ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    # mypy over the installed layout (interceptors/ as a2a_grpc/interceptors/), which the source tree lacks
    result = _run("scripts/typecheck.py")
    assert result.returncode == 0, result.stdout + result.stderr
