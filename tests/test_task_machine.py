"""The task machine on its own: every transition, every illegal one, and cancel in each phase, with the real
in-memory store and no gRPC, no agent and no task manager (the test plays the agent and the manager)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from a2a_grpc.agent import PublisherError, RequestContext, TaskLimitError
from a2a_grpc.call import CallContext
from a2a_grpc.errors import StorageUnavailableError, TaskNotCancelableError, UnsupportedOperationError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store import MemoryStore
from a2a_grpc.store.base import TaskWrite
from a2a_grpc.tasks import SUBSCRIBER_BUFFER_BYTES, Phase, TaskLimits, TaskMachine, TaskRun, TransitionError
from a2a_grpc.tasks.live_tasks import LiveTasks
from a2a_grpc.tasks.writes import TaskWriter

if TYPE_CHECKING:
    from a2a_grpc.trace_context import TraceContext

OWNER = "p"


def registry(store: MemoryStore, limits: TaskLimits | None = None) -> LiveTasks:
    """The machines' home, wired as the task manager wires it."""
    tasks = LiveTasks(store, limits or TaskLimits(), SUBSCRIBER_BUFFER_BYTES)
    tasks.storage = TaskWriter(store, tasks, None, None)
    return tasks


def user_message(text: str, task_id: str = "") -> a2a_pb2.Message:
    message = a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER, task_id=task_id, context_id="c")
    message.parts.add(text=text)
    return message


def agent_message(text: str) -> a2a_pb2.Message:
    message = a2a_pb2.Message(message_id=f"a-{text}", role=a2a_pb2.ROLE_AGENT)
    message.parts.add(text=text)
    return message


def new_machine(tasks: LiveTasks, task_id: str = "t1") -> TaskMachine:
    task = a2a_pb2.Task(id=task_id, context_id="c")
    task.status.state = a2a_pb2.TASK_STATE_SUBMITTED
    task.history.append(user_message("hello", task_id))
    return tasks.new(task, OWNER)


def phase(machine: TaskMachine) -> Phase:
    """The machine's phase as it is now (read through a call, so that a check does not fix its type)."""
    return machine.phase


async def forever() -> None:
    await asyncio.Event().wait()


def context(machine: TaskMachine, message: a2a_pb2.Message | None = None) -> RequestContext:
    return RequestContext(message or machine.task.history[-1], machine, CallContext(principal=OWNER))


class UnansweredStorage:
    """A writer that takes a machine's writes and never answers: each stays under way."""

    def __init__(self) -> None:
        self.writes: list[TaskWrite] = []

    def write(
        self, machine: TaskMachine, write: TaskWrite, durable: asyncio.Future[None], trace: TraceContext | None
    ) -> None:
        self.writes.append(write)


def submitted(tasks: LiveTasks) -> tuple[TaskMachine, TaskRun]:
    machine = new_machine(tasks)
    return machine, machine.submit(context(machine), created=True)


async def stored_state(store: MemoryStore, task_id: str = "t1") -> int | None:
    task = await store.get_task(task_id, OWNER)
    return None if task is None else task.status.state


async def interrupted(tasks: LiveTasks) -> tuple[TaskMachine, TaskRun]:
    """A task stored waiting for input, its run ended."""
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_INPUT_REQUIRED, agent_message("which one?"))
    machine.end_run(run)
    await machine.durable()
    return machine, run


# ---- submit ----------------------------------------------------------------------------------------------


async def test_a_new_task_is_idle_and_its_submit_starts_a_run_that_shows_nothing_yet() -> None:
    tasks = registry(MemoryStore())
    machine = new_machine(tasks)
    assert phase(machine) is Phase.IDLE and machine.run is None
    run = machine.submit(context(machine), created=True)
    assert phase(machine) is Phase.RUNNING and machine.run is run
    assert not machine.shown and not run.opened.done() and not run.settled.done()
    assert machine.last_write is None, "nothing to store until the agent publishes"


async def test_a_submit_that_shows_now_opens_the_call_and_the_create_write() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine = new_machine(tasks)
    run = machine.submit(context(machine), created=True, show_now=True)
    assert run.opened.done() and run.opened.result() is None
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_SUBMITTED


async def test_a_submit_continuing_an_interrupted_task_runs_it_again_with_the_message_in_its_history() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, _ = await interrupted(tasks)
    message = user_message("the red one", machine.task.id)
    subscriber = tasks.new_subscriber(close_on_interrupt=True)
    run = machine.submit(context(machine, message), created=False, subscriber=subscriber)
    assert phase(machine) is Phase.RUNNING and machine.state == a2a_pb2.TASK_STATE_WORKING
    assert run.opened.done() and run.opened.result() is None
    assert run.snapshot is not None and run.snapshot_seq == machine.seq
    assert machine.task.history[-1].message_id == message.message_id
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_WORKING


async def test_a_submit_on_a_final_task_is_refused() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    with pytest.raises(UnsupportedOperationError, match="terminal state"):
        machine.submit(context(machine, user_message("more", machine.task.id)), created=False)
    assert phase(machine) is Phase.FINAL


async def test_a_submit_while_a_run_works_on_the_task_is_refused() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    with pytest.raises(UnsupportedOperationError, match="still processing"):
        machine.submit(context(machine, user_message("more", machine.task.id)), created=False)
    assert machine.run is run


async def test_a_submit_on_a_task_another_replica_runs_is_refused() -> None:
    tasks = registry(MemoryStore())
    task = a2a_pb2.Task(id="t1", context_id="c")
    task.status.state = a2a_pb2.TASK_STATE_WORKING
    machine = TaskMachine(tasks, task, OWNER, 3, 4)
    assert phase(machine) is Phase.IDLE
    with pytest.raises(UnsupportedOperationError, match="still processing"):
        machine.submit(context(machine, user_message("more", "t1")), created=False)
    assert machine.run is None and machine.version == 3


async def test_a_submit_for_another_context_is_refused() -> None:
    tasks = registry(MemoryStore())
    machine, _ = await interrupted(tasks)
    message = user_message("elsewhere", machine.task.id)
    message.context_id = "another"
    with pytest.raises(Exception, match="does not match the task's context"):
        machine.submit(context(machine, message), created=False)
    assert phase(machine) is Phase.INTERRUPTED


async def test_a_task_is_created_once() -> None:
    tasks = registry(MemoryStore())
    machine, _ = submitted(tasks)
    with pytest.raises(TransitionError, match="created already"):
        machine.submit(context(machine), created=True)


# ---- what the agent publishes ------------------------------------------------------------------------


async def test_the_first_publish_shows_the_task_and_each_publish_is_the_next_event() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    assert run.opened.done() and run.opened.result() is None and machine.version == 1
    artifact = a2a_pb2.Artifact(artifact_id="a")
    artifact.parts.add(text="part")
    machine.publish_artifact(run, artifact, append=False, last_chunk=True)
    assert machine.seq == 2 and machine.version == 1, "one turn's changes are one write"
    await machine.durable()
    stored = await store.get_task("t1", OWNER)
    assert stored is not None and [a.artifact_id for a in stored.artifacts] == ["a"]
    assert [event.seq for event in await store.read_events("t1", 0, 10)] == [1, 2]


async def test_a_final_status_settles_the_run_and_closes_the_streams() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine = new_machine(tasks)
    subscriber = tasks.new_subscriber(close_on_interrupt=False)
    run = machine.submit(context(machine), created=True, subscriber=subscriber)
    machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, agent_message("done"))
    assert phase(machine) is Phase.FINAL and run.settled.done()
    assert machine.run is run, "the run stays the task's until its agent returns"
    assert subscriber.closed and not machine.watched
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_COMPLETED


async def test_an_interrupted_status_settles_the_run_and_hands_the_task_back_to_the_client() -> None:
    tasks = registry(MemoryStore())
    machine = new_machine(tasks)
    closing = tasks.new_subscriber(close_on_interrupt=True)
    staying = tasks.new_subscriber(close_on_interrupt=False)
    run = machine.submit(context(machine), created=True, subscriber=closing)
    machine.subscribe(staying)
    machine.publish_status(run, a2a_pb2.TASK_STATE_AUTH_REQUIRED, agent_message("sign in"))
    assert phase(machine) is Phase.INTERRUPTED and machine.run is None and run.settled.done()
    assert closing.closed and not staying.closed and machine.watched
    machine.unsubscribe(staying)
    assert staying.closed and not machine.watched


async def test_publishing_after_a_final_state_is_a_publisher_error() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    with pytest.raises(PublisherError, match="already TASK_STATE_COMPLETED"):
        machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    with pytest.raises(PublisherError, match="already TASK_STATE_COMPLETED"):
        machine.publish_artifact(run, a2a_pb2.Artifact(artifact_id="a"), append=False, last_chunk=False)


async def test_publishing_from_a_run_that_is_over_is_a_publisher_error() -> None:
    tasks = registry(MemoryStore())
    machine, run = await interrupted(tasks)
    with pytest.raises(PublisherError, match="is over"):
        machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    with pytest.raises(PublisherError, match="is over"):
        machine.reply(run, agent_message("late"))
    assert phase(machine) is Phase.INTERRUPTED


async def test_an_artifact_past_the_tasks_limit_is_refused_and_not_published() -> None:
    tasks = registry(MemoryStore(), TaskLimits(max_artifact_bytes=16))
    machine, run = submitted(tasks)
    artifact = a2a_pb2.Artifact(artifact_id="a")
    artifact.parts.add(text="x" * 64)
    with pytest.raises(TaskLimitError, match="at most 16 artifact bytes"):
        machine.publish_artifact(run, artifact, append=False, last_chunk=True)
    assert machine.seq == 0 and not machine.shown


async def test_a_reply_drops_the_task_unstored() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine = new_machine(tasks)
    subscriber = tasks.new_subscriber(close_on_interrupt=True)
    run = machine.submit(context(machine), created=True, subscriber=subscriber)
    reply = agent_message("just this")
    machine.reply(run, reply)
    assert phase(machine) is Phase.DROPPED and machine.run is None
    assert run.opened.result() is reply and run.reply is reply and reply.task_id == ""
    assert run.settled.done() and subscriber.closed
    assert tasks.get(machine.task.id) is None
    assert await stored_state(store) is None
    with pytest.raises(PublisherError, match="is over"):
        machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    with pytest.raises(TransitionError, match="dropped"):
        machine.submit(context(machine, user_message("again", machine.task.id)), created=False)


async def test_a_reply_after_the_task_was_shown_is_a_publisher_error() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    with pytest.raises(PublisherError, match="must come before anything else"):
        machine.reply(run, agent_message("too late"))
    assert phase(machine) is Phase.RUNNING


# ---- the end of a run ------------------------------------------------------------------------------


async def test_a_run_that_ends_unsettled_fails_its_task_and_its_write_goes_at_once() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, run = submitted(tasks)
    machine.end_run(run)
    assert phase(machine) is Phase.FINAL and machine.state == a2a_pb2.TASK_STATE_FAILED
    assert machine.run is None and run.settled.done()
    assert machine.last_write is not None and machine.last_write.done()
    assert "stopped" in machine.task.status.message.parts[0].text
    assert tasks.get(machine.task.id) is None, "released: nobody needs it any more"
    assert await stored_state(store) == a2a_pb2.TASK_STATE_FAILED


async def test_a_run_that_ends_after_settling_only_lets_go_of_the_task() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    seq = machine.seq
    machine.end_run(run)
    assert machine.run is None and machine.seq == seq and machine.state == a2a_pb2.TASK_STATE_COMPLETED


# ---- the server settles a task -----------------------------------------------------------------------


async def test_conclude_settles_a_task_no_run_works_on() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, _ = await interrupted(tasks)
    machine.conclude(a2a_pb2.TASK_STATE_CANCELED, None)
    assert phase(machine) is Phase.FINAL
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_CANCELED


async def test_conclude_is_refused_while_a_run_works_on_the_task_or_for_a_state_that_is_not_final() -> None:
    tasks = registry(MemoryStore())
    machine, _ = submitted(tasks)
    with pytest.raises(TransitionError, match="while running"):
        machine.conclude(a2a_pb2.TASK_STATE_FAILED, None)
    idle = new_machine(tasks, "t2")
    with pytest.raises(TransitionError, match="TASK_STATE_WORKING"):
        idle.conclude(a2a_pb2.TASK_STATE_WORKING, None)


# ---- cancel in each phase ------------------------------------------------------------------------------


async def test_cancel_of_a_running_task_that_is_shown() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    machine.cancel(run)
    assert phase(machine) is Phase.CANCELLING
    machine.publish_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
    assert phase(machine) is Phase.FINAL and run.settled.done()


async def test_cancel_of_a_running_task_not_shown_yet_shows_it_canceled() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, run = submitted(tasks)
    machine.cancel(run)
    assert phase(machine) is Phase.CANCELLING and not machine.shown
    machine.publish_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
    assert run.opened.result() is None and phase(machine) is Phase.FINAL
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_CANCELED


async def test_cancel_of_a_task_cancelling_already_joins_it() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.cancel(run)
    machine.cancel(run)
    assert phase(machine) is Phase.CANCELLING and machine.run is run


async def test_cancel_of_an_interrupted_task_opens_a_run_for_the_agents_cancel() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, _ = await interrupted(tasks)
    run = machine.open_cancel_run(context(machine), None)
    assert phase(machine) is Phase.CANCELLING and machine.run is run
    with pytest.raises(UnsupportedOperationError, match="still processing"):
        machine.submit(context(machine, user_message("meanwhile", machine.task.id)), created=False)
    machine.cancel(run)  # the cancel joins the run it opened
    machine.publish_status(run, a2a_pb2.TASK_STATE_CANCELED, None)
    machine.end_cancel_run(run)
    assert phase(machine) is Phase.FINAL and machine.run is None and run.settled.done()
    await machine.durable()
    assert await stored_state(store) == a2a_pb2.TASK_STATE_CANCELED


async def test_cancel_of_a_final_task_is_not_cancelable() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    with pytest.raises(TaskNotCancelableError, match="already TASK_STATE_COMPLETED"):
        machine.cancel(run)
    with pytest.raises(TaskNotCancelableError):
        machine.open_cancel_run(context(machine), None)


async def test_cancel_of_a_run_that_is_not_the_tasks_is_refused() -> None:
    tasks = registry(MemoryStore())
    machine, run = await interrupted(tasks)
    with pytest.raises(TransitionError, match="no run to cancel while interrupted"):
        machine.cancel(run)
    running, current = submitted(registry(MemoryStore()))
    with pytest.raises(TransitionError, match="cannot open a cancel run while running"):
        running.open_cancel_run(context(running), None)
    assert running.run is current


# ---- the store -----------------------------------------------------------------------------------------


async def test_flush_hands_the_pending_write_to_the_store_before_the_turn_ends() -> None:
    store = MemoryStore()
    tasks = registry(store)
    machine, run = submitted(tasks)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    assert machine.last_write is not None and not machine.last_write.done()
    machine.flush(None)
    assert machine.last_write.done(), "the memory store answers at once"
    assert await stored_state(store) == a2a_pb2.TASK_STATE_WORKING


async def test_a_refused_write_drops_the_task_stops_its_run_and_fails_its_callers() -> None:
    tasks = registry(MemoryStore())
    storage = tasks.storage = UnansweredStorage()
    machine, run = submitted(tasks)
    runner = asyncio.ensure_future(forever())
    run.started(runner)
    machine.publish_status(run, a2a_pb2.TASK_STATE_WORKING, None)
    durable = machine.last_write
    assert durable is not None
    machine.flush(None)
    assert storage.writes, "the write is under way"
    error = StorageUnavailableError("storage full, retry later")
    machine.write_failed(error)
    machine.stored(durable, error)
    assert phase(machine) is Phase.DROPPED and machine.run is None and tasks.get(machine.task.id) is None
    with pytest.raises(asyncio.CancelledError):
        await runner
    with pytest.raises(StorageUnavailableError):
        await machine.durable()
    with pytest.raises(PublisherError, match="is over"):
        machine.publish_status(run, a2a_pb2.TASK_STATE_COMPLETED, None)
    machine.write_failed(RuntimeError("a later failure"))
    assert machine.write_error is error, "callers get the first failure's error"


# ---- a replica's reload --------------------------------------------------------------------------------


async def test_take_over_replaces_the_task_with_the_version_another_replica_stored() -> None:
    tasks = registry(MemoryStore())
    machine, _ = await interrupted(tasks)
    newer = a2a_pb2.Task(id=machine.task.id, context_id="c")
    newer.status.state = a2a_pb2.TASK_STATE_COMPLETED
    machine.take_over(newer, 5, 9)
    assert machine.task is newer and (machine.version, machine.seq) == (5, 9)
    assert phase(machine) is Phase.FINAL


async def test_take_over_is_refused_while_a_run_works_on_the_task_here() -> None:
    tasks = registry(MemoryStore())
    machine, run = submitted(tasks)
    with pytest.raises(TransitionError, match="worked on here"):
        machine.take_over(a2a_pb2.Task(id=machine.task.id), 5, 9)
    assert machine.run is run and machine.version == 0
