"""The benchmark suite behind `scripts/bench` (run it as `python -m bench`).

Only the standard library may be imported here and in `bench.protocol`: `bench.sdk_server` runs in the
reference SDK's own venv, where our package is not installed.
"""
