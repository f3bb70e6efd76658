"""Summarise a py-spy raw profile (`scripts/bench --profile DIR` writes one per server of ours).

`python -m bench.profile DIR/send.memory.ext.txt [--top 25] [--per N]` prints the functions that
take the most samples, by self time and by inclusive time, and the share of each package. With
`--per N` (the number of requests or events the profile covered) it also prints microseconds per unit,
taking the profile's active samples as the server's Python CPU time at the sampling rate.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
PACKAGES = (
    ("a2a_grpc/", "a2a_grpc"),
    ("interceptors/", "interceptors"),
    ("grpc/", "grpc"),
    ("google/protobuf", "protobuf"),
    ("uvloop", "uvloop"),
    ("asyncio/", "asyncio"),
    ("jsonschema", "jsonschema"),
)


def package_of(file: str) -> str:
    for marker, name in PACKAGES:
        if marker in file:
            return name
    return "other"


def short(frame: str) -> str:
    match = FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"]
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{match['function']} ({file})"


def read(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
            stacks.append((frames, int(count)))
    return stacks


def summarise(path: Path, top: int, per: int | None, rate: int) -> str:
    stacks = read(path)
    total = sum(count for _, count in stacks)
    if not total:
        return f"{path}: no samples"
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    for frames, count in stacks:
        if frames:
            self_time[short(frames[-1])] += count
            match = FRAME.match(frames[-1])
            packages[package_of(match["file"] if match else frames[-1])] += count
        for frame in {short(f) for f in frames}:
            inclusive[frame] += count

    def share(count: int) -> str:
        text = f"{count / total * 100:5.1f}%"
        if per:
            text += f" {count / rate / per * 1e6:8.1f} us/op"
        return text

    lines = [f"{path}: {total} active samples"]
    lines += ["", "self time by package:"] + [f"  {share(c)}  {name}" for name, c in packages.most_common()]
    lines += ["", f"top {top} by self time:"] + [f"  {share(c)}  {name}" for name, c in self_time.most_common(top)]
    lines += ["", f"top {top} by inclusive time:"] + [f"  {share(c)}  {name}" for name, c in inclusive.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--per", type=int, help="requests (or events) the profile covered, for us/op")
    parser.add_argument("--rate", type=int, default=250, help="py-spy sampling rate used (bench uses 250)")
    args = parser.parse_args(argv)
    for path in args.profile:
        print(summarise(path, args.top, args.per, args.rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
