"""`python3 tests/pg_cluster.py` (scripts/_system.sh): print the PostgreSQL server's bin directory, or exit 1.

The throwaway cluster itself is bench/pg_cluster.py, shared by the tests (conftest.py) and the bench.
"""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parent.parent / "bench" / "pg_cluster.py"), run_name="__main__")
