"""The growth.* cases' table (Markdown, per store: each measure's p50 / p99 at each size, and the ratio of the
largest size's p50 to the smallest's) and plot (PNG: p50 against stored tasks, both axes logarithmic, a panel
per store). matplotlib is the `bench` extra, imported only to draw."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.growth import MEASURES

STORES = ("memory", "sqlite", "postgres")
STORE_NAMES = {"memory": "memory", "sqlite": "SQLite", "postgres": "PostgreSQL"}
Record = dict[str, Any]
NOTE = (
    "each call's p50 / p99 in ms, in a row on one connection, through `a2a-grpc serve` with its defaults; "
    "SQLite and PostgreSQL loaded before the start, the memory store after it (its start-up is an empty store's)"
)


def _by_store(records: Iterable[Record]) -> dict[str, list[Record]]:
    grouped: dict[str, list[Record]] = {}
    for record in sorted(records, key=lambda r: (STORES.index(r["store"]), r["tasks"])):
        grouped.setdefault(record["store"], []).append(record)
    return grouped


def _measured(records: list[Record]) -> list[Record]:
    return [r for r in records if "measures" in r]


def _cell(record: Record, measure: str) -> str:
    figures = record["measures"][measure]
    return f"{figures['p50_ms']:.2f} / {figures['p99_ms']:.2f}"


def _ratio(first: float, last: float) -> str:
    return f"{last / first:.1f}x" if first > 0 else "-"


def table(records: Iterable[Record]) -> str:
    """The Markdown tables, one per store; a record that failed is one line under its store's table."""
    lines: list[str] = []
    for store, runs in _by_store(records).items():
        done = _measured(runs)
        lines += ["", f"**{STORE_NAMES[store]}** (p50 / p99, ms; start-up in seconds)", ""]
        if done:
            sizes = [f"{r['tasks']:,}" for r in done]
            lines.append(f"| call | {' | '.join(sizes)} | {sizes[-1]} / {sizes[0]} (p50) |")
            lines.append("|---|" + "---:|" * (len(done) + 1))
            for measure in MEASURES:
                first, last = done[0]["measures"][measure]["p50_ms"], done[-1]["measures"][measure]["p50_ms"]
                cells = " | ".join(_cell(r, measure) for r in done)
                lines.append(f"| {measure} | {cells} | {_ratio(first, last)} |")
            starts = " | ".join(f"{r['start_seconds']:.2f}" for r in done)
            lines.append(f"| start-up | {starts} | {_ratio(done[0]['start_seconds'], done[-1]['start_seconds'])} |")
        lines += [f"- {r['name']}: FAILED: {r['failed']}" for r in runs if "failed" in r]
    return "\n".join(lines).strip()


def plot(records: Iterable[Record], path: Path) -> None:
    """The PNG at `path`: p50 of each measure against the stored tasks, a panel per store."""
    import matplotlib  # the bench extra, needed only here

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    grouped = {store: _measured(runs) for store, runs in _by_store(records).items()}
    grouped = {store: runs for store, runs in grouped.items() if runs}
    panels = max(len(grouped), 1)
    figure, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.6), squeeze=False, sharey=True)
    for axis, (store, runs) in zip(axes[0], grouped.items(), strict=False):
        sizes = [r["tasks"] for r in runs]
        for measure in MEASURES:
            axis.plot(sizes, [r["measures"][measure]["p50_ms"] for r in runs], marker="o", markersize=3, label=measure)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes, [_short(size) for size in sizes])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
        axis.set_title(STORE_NAMES[store], fontsize=10)
        axis.set_xlabel("stored tasks", fontsize=9)
        axis.grid(True, which="both", linewidth=0.3)
        axis.tick_params(labelsize=8)
    axes[0][0].set_ylabel("p50 latency (ms)", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(MEASURES), fontsize=7, frameon=False)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path, dpi=80)
    plt.close(figure)


def _minor_label(value: float, _: object) -> str:
    """2 and 5 of each decade labelled, the other minor ticks not."""
    return f"{value:g}" if value > 0 and round(value / 10 ** math.floor(math.log10(value))) in (2, 5) else ""


def _short(size: int) -> str:
    """1k, 10k, 1M: a size as the plot's axis shows it."""
    for unit, name in ((1_000_000, "M"), (1_000, "k")):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{name}"
    return str(size)


def write(records: list[Record], out: Path) -> str:
    """The tables beside `out` (NAME-growth.md) and the plot (NAME-growth.png, when any size was measured);
    what to print: the tables and where they went."""
    tables = table(records)
    stem = out.with_suffix("")
    markdown, png = Path(f"{stem}-growth.md"), Path(f"{stem}-growth.png")
    markdown.write_text(tables + "\n")
    written = [str(markdown)]
    if any("measures" in r for r in records):
        plot(records, png)
        written.append(str(png))
    return f"\nGrowth ({NOTE}):\n{tables}\n\ngrowth tables and plot written to {', '.join(written)}"
