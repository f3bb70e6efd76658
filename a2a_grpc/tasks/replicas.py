"""What a replica does to share a store with others: keep its lease, notice dead replicas, follow the
events and cancel requests other replicas write, and cancel the tasks they run.

The task manager owns one `ReplicaKeeper` when its store is shared. The keeper renews this replica's
heartbeat, fails the running tasks whose runner's lease expired (each exactly once: the failing write
is versioned, so only the first replica's lands), and, while the store's notification connection is
down, polls for what notifications would have said.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from a2a_grpc.call import CallContext, owner_call
from a2a_grpc.errors import A2AError, TaskChangedError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.ids import new_id
from a2a_grpc.protocol import RUNNING_STATES
from a2a_grpc.settings.defaults import LEASE_SECONDS as LEASE_SECONDS
from a2a_grpc.settings.defaults import POLL_SECONDS as POLL_SECONDS
from a2a_grpc.store.base import SharedStore, StoreError
from a2a_grpc.tasks.agent_runs import CANCEL_GRACE_SECONDS, AgentRuns
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.machine import TaskMachine
from a2a_grpc.tasks.phase import Phase

log = logging.getLogger(__name__)

# How much longer a cancel routed to another replica waits for that replica to answer.
ROUTED_CANCEL_MARGIN_SECONDS = 2.0


class ReplicaKeeper:
    """The background work of one replica, and what it does to the tasks of the others: it acts on this
    process's live tasks through their machines (found in `tasks`) and `runs`, as the task manager does."""

    def __init__(
        self,
        store: SharedStore,
        tasks: LiveTasks,
        runs: AgentRuns,
        *,
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.store = store
        self._tasks = tasks
        self._runs = runs
        self.lease_seconds = lease_seconds
        self._poll_seconds = min(poll_seconds, lease_seconds / 3)
        self._loops: list[asyncio.Task[None]] = []
        self._cancel_checks: set[asyncio.Task[None]] = set()
        self._failing = False  # the last round failed: log once per incident

    def start(self) -> None:
        self.store.listen(self._tasks.note_events, self._cancel_requested)
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._keep_lease()), loop.create_task(self._follow())]

    async def stop(self) -> None:
        """Stop following the other replicas, and give up this replica's lease once its last writes are stored."""
        background = [*self._loops, *self._cancel_checks]
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        writes = [machine.last_write for machine in self._tasks if machine.last_write is not None]
        await asyncio.gather(*writes, return_exceptions=True)
        try:
            await self.store.release()
        except Exception as error:  # the lease then lapses on its own
            log.warning("could not give up this server's lease on its tasks: %s", error)

    async def cancel_elsewhere(self, machine: TaskMachine, call: CallContext) -> TaskMachine:
        """Cancel a task another replica runs: ask it through the store and wait for the task to settle;
        cancel it here if the runner does not answer (it may have died before its lease expired)."""
        watcher = self._tasks.watch(machine, None, close_on_interrupt=True)
        try:
            await self.store.request_cancel(machine.task.id)
            async with asyncio.timeout(CANCEL_GRACE_SECONDS + ROUTED_CANCEL_MARGIN_SECONDS):
                async for _ in watcher.events():
                    pass
        except TimeoutError:
            pass
        finally:
            machine.unsubscribe(watcher)
        machine = await self._tasks.load(machine.task.id, call)
        if machine.phase in (Phase.IDLE, Phase.INTERRUPTED):
            machine.conclude(a2a_pb2.TASK_STATE_CANCELED, None)
            try:
                await machine.durable()
            except TaskChangedError:  # the runner's own answer landed first
                machine = await self._tasks.load(machine.task.id, call)
        return machine

    def _cancel_requested(self) -> None:
        check = asyncio.get_running_loop().create_task(self._take_cancel_requests())
        self._cancel_checks.add(check)
        check.add_done_callback(self._cancel_checks.discard)

    async def _take_cancel_requests(self) -> None:
        for task_id in await self.store.take_cancel_requests():
            machine = self._tasks.get(task_id)
            if machine is not None and machine.run is not None and machine.phase is not Phase.FINAL:
                self._runs.cancel_once(machine.run)

    async def _keep_lease(self) -> None:
        """Renew the heartbeat, and fail the runs of replicas whose lease expired, but only after a whole
        lease of this replica's own heartbeats: after an outage of the store every replica's heartbeat
        looks old until the others have had the time to renew theirs too."""
        loop = asyncio.get_running_loop()
        healthy_since: float | None = None
        while True:
            try:
                await self.store.heartbeat()
                healthy_since = loop.time() if healthy_since is None else healthy_since
                if loop.time() - healthy_since >= self.lease_seconds:
                    await self._fail_expired_runs()
                self._recovered()
            except Exception as error:  # the store is unreachable: the next round retries
                healthy_since = None
                self._failed(error)
            await asyncio.sleep(self.lease_seconds / 3)

    async def _follow(self) -> None:
        """While notifications are down, and once just after they come back, poll for what they say."""
        was_listening = True
        while True:
            listening = self.store.listening
            if not (listening and was_listening):
                try:
                    await self._poll()
                except Exception as error:
                    listening = False  # poll again next round
                    self._failed(error)
            was_listening = listening
            await asyncio.sleep(self._poll_seconds)

    async def _fail_expired_runs(self) -> None:
        expired = await self.store.expired_runs(self.lease_seconds)
        await asyncio.gather(*(self._fail_expired(task_id, owner) for task_id, owner in expired))

    async def _fail_expired(self, task_id: str, owner: str) -> None:
        """Fail a task whose runner's lease expired, unless another replica did first."""
        machine = self._tasks.get(task_id)
        if machine is not None and machine.run is not None:
            return  # this replica runs it: its own heartbeat was late
        try:
            machine = await self._tasks.load(task_id, owner_call(owner))
        except A2AError:
            return
        if machine.phase is Phase.IDLE and machine.state in RUNNING_STATES:
            message = a2a_pb2.Message(message_id=new_id(), role=a2a_pb2.ROLE_AGENT)
            message.parts.add(text="The server running this task stopped: its lease expired.")
            machine.conclude(a2a_pb2.TASK_STATE_FAILED, message)
            with contextlib.suppress(StoreError, A2AError):  # changed meanwhile, or the store is full
                await machine.durable()
        self._tasks.release(machine)

    async def _poll(self) -> None:
        watched = self._tasks.watched_elsewhere()
        if watched:
            for task_id, seq in (await self.store.event_heads(watched)).items():
                self._tasks.note_events(task_id, seq)
        await self._take_cancel_requests()

    def _failed(self, error: BaseException) -> None:
        if not self._failing:
            self._failing = True
            log.warning("cannot reach the shared task store; retrying: %s", error)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("the shared task store is reachable again")
