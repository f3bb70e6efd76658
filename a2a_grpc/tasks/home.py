"""What the machines of one manager share (`TaskHome`, the registry of live tasks): the loop, the limits, and
the writer that stores their writes (`Storage`). Generic in the machine, so that neither needs its module."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, TypeVar

from a2a_grpc.store.base import TaskWrite
from a2a_grpc.tasks.subscriber import TaskLog

if TYPE_CHECKING:  # opentelemetry is an optional extra: tracing is imported only where it is on
    from a2a_grpc.trace_context import TraceContext

MachineT_contra = TypeVar("MachineT_contra", contravariant=True)


class Storage(Protocol[MachineT_contra]):
    """What stores a machine's writes (the TaskWriter): it answers through `stored` and `write_failed`."""

    def write(
        self, machine: MachineT_contra, write: TaskWrite, durable: asyncio.Future[None], trace: TraceContext | None
    ) -> None: ...


class TaskHome(Protocol[MachineT_contra]):
    """What the machines of one manager share (the registry of live tasks)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def storage(self) -> Storage[MachineT_contra]: ...

    @property
    def max_history(self) -> int: ...

    @property
    def max_artifact_bytes(self) -> int: ...

    @property
    def max_history_bytes(self) -> int: ...

    def log(self, machine: MachineT_contra) -> TaskLog: ...

    def forget(self, machine: MachineT_contra) -> None: ...

    def release(self, machine: MachineT_contra) -> None: ...
