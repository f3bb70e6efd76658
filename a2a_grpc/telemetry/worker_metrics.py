"""`/metrics` under `a2a-grpc serve --workers N`: every worker's metrics in each scrape, whichever worker the
kernel hands the scrape's connection to.

Each worker also serves its own metrics on a Unix socket, `worker-I.sock` in a directory the parent made
(WORKER_METRICS_DIR_ENV). The worker a scrape reaches answers with its own metrics and those of every other
socket there, each sample labelled `worker="I"` (sum them by the other labels for the server's totals). A
worker that does not answer within FETCH_SECONDS (being replaced, say) is left out of that scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from a2a_grpc.telemetry.metrics import METRICS_PATH

WORKER_METRICS_DIR_ENV = "A2A_GRPC_WORKER_METRICS_DIR"  # set by the parent of the workers
FETCH_SECONDS = 1.0


class WorkerMetrics:
    """Worker `index`'s side: its own metrics (`registry`) on its socket in `directory`, and the handler of
    the public `/metrics`, which gathers every worker's."""

    def __init__(self, registry: CollectorRegistry, directory: Path, index: int) -> None:
        self.registry = registry
        self.directory = directory
        self.index = index
        self.socket = directory / f"worker-{index}.sock"
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self.socket.unlink(missing_ok=True)  # left by the worker this one replaces
        app = web.Application()
        app.router.add_get(METRICS_PATH, self._own)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.socket)).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.socket.unlink(missing_ok=True)

    async def handle(self, request: web.Request) -> web.Response:
        """The public `/metrics`: every worker's samples, labelled by worker."""
        others = [path for path in self.directory.glob("worker-*.sock") if path != self.socket]
        texts = await asyncio.gather(*(_fetch(path) for path in others))
        labelled: list[tuple[str, Iterable[Metric]]] = [(str(self.index), self.registry.collect())]
        labelled += [
            (_index_of(path), text_string_to_metric_families(text))
            for path, text in zip(others, texts, strict=True)
            if text is not None
        ]
        merged = CollectorRegistry(auto_describe=False)
        merged.register(_Merged(labelled))
        return web.Response(body=generate_latest(merged), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _own(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _fetch(path: Path) -> str | None:
    """Another worker's own metrics, or None when it does not answer in time."""
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as session,
            asyncio.timeout(FETCH_SECONDS),
            session.get(f"http://localhost{METRICS_PATH}") as response,
        ):
            if response.status == 200:
                return await response.text()
    return None


def _index_of(path: Path) -> str:
    return path.stem.removeprefix("worker-")


class _Merged:
    """The families of several workers' expositions as one, each sample labelled with its worker."""

    def __init__(self, labelled: Iterable[tuple[str, Iterable[Metric]]]) -> None:
        self._families: dict[str, Metric] = {}
        for worker, families in labelled:
            for family in families:
                samples = [sample._replace(labels={**sample.labels, "worker": worker}) for sample in family.samples]
                merged = self._families.get(family.name)
                if merged is None:
                    family.samples = samples
                    self._families[family.name] = family
                else:
                    merged.samples.extend(samples)

    def collect(self) -> Iterable[Metric]:
        return iter(self._families.values())
