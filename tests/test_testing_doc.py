"""The examples of docs/testing.md, saved as test files and run by pytest in a directory of their own (no
configuration of this project applies: pytest-asyncio's strict mode, as in a new user's project)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from process import child_env
from test_readme import fenced_blocks

EXAMPLES = {"test_first.py": "A first test", "test_fixture.py": "A fixture, extensions and generated stubs"}
RUN_SECONDS = 120.0


def test_the_testing_examples_pass_as_written(tmp_path: Path) -> None:
    tests = 0
    for name, title in EXAMPLES.items():
        [example] = fenced_blocks(title, "python")
        (tmp_path / name).write_text("\n".join(example) + "\n")
        tests += sum(1 for line in example if re.match(r"async def test_", line))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *EXAMPLES],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tests} passed" in done.stdout, done.stdout
    assert tests == 4
