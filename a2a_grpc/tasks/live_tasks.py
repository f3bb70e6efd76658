"""The live tasks of this process: the machine of each task worked on or watched here, loaded from the store
once and forgotten when nobody needs it any more, and the subscribers that watch them. The registry is the
machines' `TaskHome`: what they share."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator

from a2a_grpc.call import CallContext
from a2a_grpc.errors import UnavailableError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store.base import TaskStore
from a2a_grpc.tasks.home import Storage
from a2a_grpc.tasks.limits import TaskLimits
from a2a_grpc.tasks.machine import TaskMachine
from a2a_grpc.tasks.rules import check_visible, not_found
from a2a_grpc.tasks.subscriber import Subscriber, TaskLog

# A load that keeps finding its entry released by another caller of the same load gives up after this many.
MAX_LOAD_ATTEMPTS = 8
BUSY_RETRY_SECONDS = 0.1


class LiveTasks:
    """The machine of each task worked on or watched here, by task id."""

    storage: Storage[
        TaskMachine
    ]  # what stores the machines' writes (the manager's TaskWriter, which loads through here)

    def __init__(self, store: TaskStore, limits: TaskLimits, subscriber_buffer_bytes: int) -> None:
        self.store = store
        self.max_history = limits.max_history
        self.max_artifact_bytes = limits.max_artifact_bytes
        self.max_history_bytes = limits.max_history_bytes
        self.subscriber_buffer_bytes = subscriber_buffer_bytes
        self._by_id: dict[str, TaskMachine] = {}
        self._loading: dict[tuple[str, str], asyncio.Future[TaskMachine | None]] = {}  # see _loaded
        self._waiting: dict[tuple[str, str], int] = {}  # callers waiting for each load

    @functools.cached_property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the tasks live on, asked for once: asking costs a system call on Python 3.11."""
        return asyncio.get_running_loop()

    def new(self, task: a2a_pb2.Task, owner: str) -> TaskMachine:
        """The machine of a new task, not shown nor stored yet."""
        machine = self._by_id[task.id] = TaskMachine(self, task, owner, 0)
        return machine

    def __iter__(self) -> Iterator[TaskMachine]:
        """The live tasks as they are now (a copy: entries may come and go while the caller goes through it)."""
        return iter(list(self._by_id.values()))

    def get(self, task_id: str) -> TaskMachine | None:
        return self._by_id.get(task_id)

    def current(self, machine: TaskMachine) -> bool:
        """Whether a live task is known to match the store: always in one process; with replicas, only
        while this one runs it or has a write of it in flight (any replica may write it otherwise)."""
        if self.store.shared is None or machine.run is not None:
            return True
        write = machine.last_write
        return write is not None and not write.done()

    async def load(self, task_id: str, call: CallContext) -> TaskMachine:
        """The live entry of a task, loaded from the store if nobody works on or watches it here (and
        reloaded when another replica may have changed it).

        A caller that loads one and then refuses the request hands it back with `release`.
        """
        for _ in range(MAX_LOAD_ATTEMPTS):
            machine = self._by_id.get(task_id)
            if machine is not None and self.current(machine):
                break
            machine = await self._loaded(task_id, call.owner)
            if machine is None:
                raise not_found(task_id)
            if self._by_id.get(task_id) is machine:
                break  # else another caller of the same load released it meanwhile: load it again
        else:
            raise UnavailableError(f"task {task_id} is busy; retry", retry_delay=BUSY_RETRY_SECONDS)
        check_visible(task_id, machine.owner, call, machine.shown)
        return machine

    async def _loaded(self, task_id: str, owner: str) -> TaskMachine | None:
        """One load of the task from the store at a time, whoever asks meanwhile (None: not the owner's).

        A second load begun while a first is under way could read the task before the first's changes are
        stored and come back after its live entry was released: two live entries, two writes of one
        version. Shared, a load's result becomes the live entry once, in the load itself; shielded, one
        caller giving up does not cancel it for the others; and when every caller gave up before it came
        back, nobody holds the entry it made, so it is released at once."""
        key = (task_id, owner)
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.ensure_future(self._load(task_id, owner))
            loading.add_done_callback(functools.partial(self._load_done, key))
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            return await asyncio.shield(loading)
        finally:
            left = self._waiting.pop(key) - 1
            if left:
                self._waiting[key] = left

    def _load_done(self, key: tuple[str, str], loading: asyncio.Future[TaskMachine | None]) -> None:
        del self._loading[key]
        if loading.cancelled() or loading.exception() is not None:  # retrieved: callers may all have gone
            return
        machine = loading.result()
        if machine is not None and key not in self._waiting:  # every caller gave up waiting
            self.release(machine)

    async def _load(self, task_id: str, owner: str) -> TaskMachine | None:
        loaded = await self.store.load_task(task_id, owner)
        machine = self._by_id.get(task_id)  # another owner's load, or a new task of this id, may have made it
        if (
            machine is not None
            and loaded is not None
            and not self.current(machine)
            and loaded.version > machine.version
        ):
            machine.take_over(*loaded)
        elif machine is None and loaded is not None:
            task, version, seq = loaded
            machine = self._by_id[task_id] = TaskMachine(self, task, owner, version, seq)
        return machine

    def release(self, machine: TaskMachine) -> None:
        """Forget a live task once nobody works on or watches it and its last write is durable
        (checked again when that write completes, since a newer one may have been made meanwhile)."""
        task_id = machine.task.id
        if machine.in_use or self._by_id.get(task_id) is not machine:
            return
        write = machine.last_write
        if write is not None and not write.done():
            write.add_done_callback(lambda _: self.release(machine))
        else:
            del self._by_id[task_id]

    def forget(self, machine: TaskMachine) -> None:
        """Drop a live task at once, whoever still holds it: it no longer stands for the stored task."""
        if self._by_id.get(machine.task.id) is machine:
            del self._by_id[machine.task.id]

    # ---- subscribers -------------------------------------------------------------------------

    def new_subscriber(self, *, close_on_interrupt: bool) -> Subscriber:
        """A stream's subscriber; one that closes on an interrupted state ends with its message's answer."""
        return Subscriber(close_on_interrupt, self.subscriber_buffer_bytes)

    def log(self, machine: TaskMachine) -> TaskLog:
        return TaskLog(self.store, machine.task.id, machine.owner)

    def watch(self, machine: TaskMachine, after: int | None, *, close_on_interrupt: bool = False) -> Subscriber:
        """A subscriber to the task's events after `after` (by default, after the last one)."""
        subscriber = self.new_subscriber(close_on_interrupt=close_on_interrupt)
        elsewhere = self.store.shared is not None and machine.run is None  # another replica may be writing it
        machine.subscribe(subscriber, after, check_log=elsewhere)
        return subscriber

    # ---- tasks other replicas write ----------------------------------------------------------

    def watched_elsewhere(self) -> list[str]:
        """The tasks this replica streams but does not run: their events come from other replicas."""
        return [task_id for task_id, machine in self._by_id.items() if machine.watched and machine.run is None]

    def note_events(self, task_id: str, seq: int) -> None:
        machine = self._by_id.get(task_id)
        if machine is not None:
            machine.note_events(seq)
