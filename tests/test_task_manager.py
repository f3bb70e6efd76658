"""The task manager on its own, with a real in-memory store: edges a server reaches only under load."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from conftest import send_request

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.agents.writer import WriterAgent
from a2a_grpc.call import CallContext
from a2a_grpc.errors import TaskNotCancelableError
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.store import MemoryStore
from a2a_grpc.store.base import LoadedTask, TaskWrite
from a2a_grpc.tasks import TaskManager, TaskRun
from a2a_grpc.tasks.eager import EAGER_START


class WaitsForever:
    """An agent that says it works on the task, then waits until it is cancelled."""

    def __init__(self) -> None:
        self.cancelled = False

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.status(a2a_pb2.TASK_STATE_WORKING)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_an_agent_that_never_waits_has_settled_and_written_its_task_when_its_start_returns() -> None:
    """Where asyncio starts tasks eagerly (Python 3.12+), submit returns a run that is over and written: no task,
    no turn of the event loop; elsewhere the run's task does the same once it runs."""
    store = MemoryStore()
    manager = TaskManager(store, EchoAgent())
    run = await manager.submit(send_request("at once"), CallContext(principal="p"))
    if EAGER_START:
        assert run.runner is None and run.settled.done() and run.opened.done()
        assert run.machine.last_write is not None and run.machine.last_write.done(), (
            "its write went to the store at once"
        )
    else:
        assert run.runner is not None and not run.settled.done()
    await asyncio.wait_for(run.settled, 5)
    await run.machine.durable()
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert [part.text for part in stored.artifacts[0].parts] == ["at once"]


async def test_a_run_cancelled_before_its_task_runs_again_fails_its_task_and_answers_its_callers() -> None:
    """Shutdown may cancel a run in the loop turn that submitted it (before its agent started, or, started
    eagerly, while it first waits: then the agent gets the CancelledError where it waits): its stream and its
    caller still get an answer (the task FAILED and stored), never a wait forever."""
    store = MemoryStore()
    agent = WaitsForever()
    manager = TaskManager(store, agent)
    call = CallContext(principal="p")
    run = await manager.submit(send_request("never ends"), call, manager.new_subscriber(close_on_interrupt=True))
    assert run.runner is not None and not run.settled.done()
    run.runner.cancel()
    assert await asyncio.wait_for(run.opened, 5) is None
    await asyncio.wait_for(run.settled, 5)
    assert agent.cancelled == EAGER_START
    await run.machine.durable()
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None
    assert stored.status.state == a2a_pb2.TASK_STATE_FAILED


class Unsettled(BaseException):
    """What no agent should raise: not an Exception, so the run's own handling lets it through."""


class EndsOddly:
    """An agent whose run ends, before it ever waits, without settling its task: it cancels its own task and
    returns, or raises what is not an Exception."""

    def __init__(self, ending: str) -> None:
        self.ending = ending

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.status(a2a_pb2.TASK_STATE_WORKING)
        if self.ending == "raises":
            raise Unsettled
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


@pytest.mark.parametrize("ending", ["cancels its task", "raises"])
async def test_a_run_that_ends_oddly_before_it_waits_fails_its_task_and_frees_it(ending: str) -> None:
    """However the agent's task ends (started eagerly or not), the task is FAILED, stored and let go: never
    left running with nobody behind it, refusing every later message."""
    store = MemoryStore()
    manager = TaskManager(store, EndsOddly(ending))
    run = await manager.submit(send_request("odd"), CallContext(principal="p"))
    await asyncio.wait_for(run.settled, 5)
    if run.runner is not None:
        with contextlib.suppress(asyncio.CancelledError, Unsettled):
            await asyncio.wait_for(run.runner, 5)
    await run.machine.durable()
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_FAILED
    assert manager._tasks.get(run.task_id) is None


class HeldFirstLoad(MemoryStore):
    """A memory store whose first load of a task reads it at once but answers only once `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0
        self.loading = asyncio.Event()
        self.answer = asyncio.Event()

    async def load_task(self, task_id: str, owner: str) -> LoadedTask | None:
        self.loads += 1
        self.loading.set()
        loaded = await super().load_task(task_id, owner)
        if self.loads == 1:
            await self.answer.wait()
        return loaded


async def waiting_for_input(manager: TaskManager, call: CallContext) -> TaskRun:
    """The writer's first turn, once its task is stored waiting for input and its run has ended."""
    run = await manager.submit(send_request("the sea"), call)
    await run.settled
    await run.machine.durable()
    if run.runner is not None:
        await asyncio.wait_for(run.runner, 5)
    return run


class CountedCancels(WriterAgent):
    cancels = 0

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        self.cancels += 1
        await super().cancel(context, events)


async def test_a_load_under_way_is_shared_so_a_task_never_has_two_live_entries() -> None:
    """Two CancelTasks of a task that waits for input, the first one's load held: the second must not load
    the task again, cancel it and forget it before the first load answers with the task as it was (two
    live entries would both write the next version: one of them fails as a conflict, INTERNAL to its caller).
    Both end well: the second joins the first's cancel (the agent's cancel runs once), or finds the task
    canceled already."""
    store = HeldFirstLoad()
    agent = CountedCancels(chunk_delay=0)
    manager = TaskManager(store, agent)
    call = CallContext(principal="p")
    run = await waiting_for_input(manager, call)
    assert manager._tasks.get(run.task_id) is None  # released: the next request loads it from the store
    first = asyncio.ensure_future(manager.cancel(run.task_id, call))
    await store.loading.wait()
    second = asyncio.ensure_future(manager.cancel(run.task_id, call))
    for _ in range(100):  # loop turns, not time: plenty for the second cancel to finish unless it waits
        await asyncio.sleep(0)
    store.answer.set()
    outcomes = await asyncio.gather(first, second, return_exceptions=True)
    canceled = [outcome for outcome in outcomes if isinstance(outcome, a2a_pb2.Task)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, TaskNotCancelableError)]
    assert canceled and len(canceled) + len(refused) == 2, outcomes
    assert agent.cancels == 1, "the second cancel joins the first's run, which the task had at once"
    assert store.loads == 1
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_CANCELED


class HeldCompletions(MemoryStore):
    """A memory store whose writes that complete a task are durable only once `durable` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.durable = asyncio.Event()
        self.held = 0

    def apply(self, write: TaskWrite) -> asyncio.Future[None]:
        stored = super().apply(write)
        status = write.task.status if write.task is not None else write.status
        if status is None or status.state != a2a_pb2.TASK_STATE_COMPLETED:
            return stored
        self.held += 1
        return asyncio.ensure_future(self._once_durable(stored))

    async def _once_durable(self, stored: asyncio.Future[None]) -> None:
        await self.durable.wait()
        await stored


async def test_an_answer_at_once_shows_only_what_is_stored() -> None:
    """SendMessage with return_immediately answers once the task's create is stored; the echo agent completes
    it meanwhile (at once: in the same write), but the write that completes it is held: while it is, no answer
    may show the completion (a crash would undo it); once it is stored, the answer may."""
    store = HeldCompletions()
    manager = TaskManager(store, EchoAgent())
    card = a2a_pb2.AgentCard(name="test")
    servicer = A2AServicer(manager, card, ExtensionRegistry([]))
    request = send_request("hello")
    request.configuration.return_immediately = True
    answering = asyncio.ensure_future(servicer.SendMessage(request, CallContext(principal="p")))
    for _ in range(100):  # loop turns, not time: the agent runs within a few
        if store.held:
            break
        await asyncio.sleep(0)
    assert store.held >= 1, "the agent completed the task while the answer waited"
    for _ in range(20):
        await asyncio.sleep(0)
    if answering.done():  # answered while the completion is held: only the stored task
        early = a2a_pb2.SendMessageResponse.FromString(answering.result())
        assert early.task.status.state == a2a_pb2.TASK_STATE_SUBMITTED and not early.task.artifacts
    store.durable.set()
    answer = a2a_pb2.SendMessageResponse.FromString(await answering)
    done = await manager.get_task(answer.task.id, CallContext(principal="p"))
    assert done.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_a_load_every_caller_gave_up_on_leaves_no_live_entry() -> None:
    """A CancelTask whose caller went away while its task was being loaded: the load still comes back (others
    might share it), and with nobody left to hand the task back, its live entry is not kept."""
    store = HeldFirstLoad()
    manager = TaskManager(store, WriterAgent(chunk_delay=0))
    call = CallContext(principal="p")
    run = await waiting_for_input(manager, call)
    given_up = asyncio.ensure_future(manager.cancel(run.task_id, call))
    await store.loading.wait()
    given_up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await given_up
    store.answer.set()
    for _ in range(100):  # loop turns, not time: the load comes back within a few
        await asyncio.sleep(0)
    assert manager._tasks.get(run.task_id) is None
    stored = await store.get_task(run.task_id, "p")
    assert stored is not None and stored.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
