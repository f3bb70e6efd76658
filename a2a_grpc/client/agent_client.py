"""A small A2A client on the generated stubs.

    async with await A2AClient.connect("http://agent.example:8080", extensions=[URI]) as client:
        result = await client.send_message("hello")
        result.value.task, result.activated_extensions

`connect` takes `host:port` or an agent card URL (the card's GRPC interface for A2A 1.0 is used).
`grpcs://host:port`, an https:// card URL, or any of `tls_ca`, `tls_cert` and `tls_key` (PEM files: the CA to
trust, a client certificate and its key for mutual TLS), make the channel TLS; an https:// card URL is fetched
with the same files. Every call
carries `a2a-version` and the requested extensions (the client's set, replaced or extended per call,
plus what a propagator forwards from the call being served); every result carries the extensions the
server activated; errors are raised as the typed errors of `a2a_grpc.errors`. A `card_verifier`
(a2a_grpc.card.verification) checks the signatures of the cards the client fetches (`connect`, `get_card`,
`get_extended_card`), raising its CardSignatureError (an AgentCardError) for a card its policy refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, Unpack

import grpc
from google.protobuf import empty_pb2

from a2a_grpc.call import CallContext
from a2a_grpc.card.errors import AgentCardError
from a2a_grpc.card.resolution import CARD_FETCH_TIMEOUT_SECONDS, card_url, fetch_agent_card, grpc_interface, is_card_url
from a2a_grpc.card.verification import CardVerifier
from a2a_grpc.client.streams import EventStream, ResumingStream
from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.ids import new_id
from a2a_grpc.interceptors.client import ResponseExtensions, client_interceptors, observe_extensions, use_extensions
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER
from a2a_grpc.telemetry.tracing_setup import client_tracer
from a2a_grpc.tls import ClientTLS

if TYPE_CHECKING:
    from a2a_grpc.trace_context import TraceContext

T = TypeVar("T")


@dataclass(frozen=True)
class Result(Generic[T]):
    """A response and the extensions the server activated for it."""

    value: T
    activated_extensions: tuple[str, ...] = ()

    def is_active(self, uri: str) -> bool:
        return uri in self.activated_extensions


@dataclass(frozen=True)
class ExtensionPropagator:
    """Forwards the extensions activated on the call being served to a downstream agent.

    Give one to an `A2AClient` used inside an agent: each outgoing call then also requests what the
    incoming call (`call`: an agent passes `context.call`) activated; `only` narrows that to some URIs.
    The downstream agent activates the ones it supports; none is activated on anyone's behalf.
    With tracing on, the calls also continue the served call's trace (W3C `traceparent`): see `trace_context`.
    """

    call: CallContext
    only: frozenset[str] | None = None

    def __call__(self) -> tuple[str, ...]:
        return tuple(uri for uri in self.call.activated_extensions if self.only is None or uri in self.only)

    @property
    def trace_context(self) -> TraceContext | None:
        """The served call's trace, when the server traces: a client given this propagator then traces its
        calls too, as children of the current span (the agent's, inside its run), else of the served call's."""
        return self.call.trace_context


class CallOptions(TypedDict, total=False):
    extensions: Iterable[str]  # replaces the client's extensions for this call
    extra_extensions: Iterable[str]  # added to them
    timeout: float
    headers: Sequence[tuple[str, str]]  # gRPC metadata for this call; replaces the client's with the same keys


def text_message(
    text: str, *, task_id: str = "", context_id: str = "", metadata: Mapping[str, Any] | None = None
) -> a2a_pb2.Message:
    """A user message with one text part and a fresh message id."""
    message = a2a_pb2.Message(
        message_id=new_id(),
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    if metadata:
        message.metadata.update(dict(metadata))
    return message


class A2AClient:
    """Calls one A2A agent over gRPC. Use as an async context manager, or call `close()`.

    Tracing (the `otel` extra): with a `tracer_provider`, or `tracing=True` for the global one, each call
    is an OpenTelemetry CLIENT span whose W3C `traceparent` the call carries; a client whose propagator
    forwards a traced call (`ExtensionPropagator` inside a traced server's agent) traces with that
    server's tracer. `tracing=False` never traces.
    """

    def __init__(
        self,
        target: str,
        *,
        extensions: Iterable[str] = (),
        version: str = "1.0",
        propagator: Callable[[], Iterable[str]] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        headers: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
        tenant: str = "",
        card: a2a_pb2.AgentCard | None = None,
        card_url: str | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        tls_ca: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        tracing: bool | None = None,
        tracer_provider: Any = None,
        card_verifier: CardVerifier | None = None,
    ) -> None:
        tls = ClientTLS(tls_ca, tls_cert, tls_key) if tls_ca or tls_cert or tls_key else None
        if tls is not None and credentials is not None:
            raise ValueError("give credentials= or tls_ca/tls_cert/tls_key, not both")
        for scheme in ("grpc://", "grpcs://"):
            if target.startswith(scheme):
                if scheme == "grpcs://" and tls is None and credentials is None:
                    tls = ClientTLS()
                target = target.removeprefix(scheme)
        if tls is not None:
            credentials = tls.channel_credentials()
        self.tls = tls
        self.target = target
        self.extensions: tuple[str, ...] = parse_extension_values(extensions)
        self.version = version
        self.propagator = propagator
        self.headers = tuple(headers)
        self.timeout = timeout
        self.tenant = tenant
        self.card = card
        self.card_url = card_url
        self.card_verifier = card_verifier
        forwarded = getattr(propagator, "trace_context", None)
        self.tracer = client_tracer(tracing, tracer_provider, forwarded)
        interceptors = client_interceptors(version=version, tracer=self.tracer)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=channel_options, interceptors=interceptors)
        else:
            self._channel = grpc.aio.secure_channel(
                target, credentials, options=channel_options, interceptors=interceptors
            )
        self._stub = a2a_pb2_grpc.A2AServiceStub(self._channel)  # type: ignore[no-untyped-call]

    @classmethod
    async def connect(cls, target: str, **settings: Any) -> A2AClient:
        """A client for `host:port`, or for the agent whose card is at an http(s) URL: the card's fetch and
        verification end within the client's `timeout` when it has one (CARD_FETCH_TIMEOUT_SECONDS otherwise)."""
        if not is_card_url(target):
            return cls(target, **settings)
        tls = ClientTLS(settings.get("tls_ca"), settings.get("tls_cert"), settings.get("tls_key"))
        timeout = settings.get("timeout")
        within = CARD_FETCH_TIMEOUT_SECONDS if timeout is None else timeout
        card = await fetch_agent_card(target, within, tls=tls, verifier=settings.get("card_verifier"))
        interface = grpc_interface(card)
        settings.setdefault("tenant", interface.tenant)
        address = interface.url
        if target.startswith("https://") and not address.startswith(("grpc://", "grpcs://")):
            address = "grpcs://" + address  # a card served over TLS names a gRPC port that speaks TLS
        return cls(address, card=card, card_url=card_url(target), **settings)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- the calls -----------------------------------------------------------------------------

    def requested_extensions(self, options: CallOptions) -> tuple[str, ...]:
        """What a call with `options` requests: the client's set (or the call's replacement), the
        call's extras, and what the propagator forwards."""
        base = options.get("extensions", self.extensions)
        forwarded = self.propagator() if self.propagator is not None else ()
        return parse_extension_values((*base, *options.get("extra_extensions", ()), *forwarded))

    def _start(self, method: str, request: Any, options: CallOptions) -> tuple[Any, list[ResponseExtensions]]:
        own = tuple(options.get("headers", ()))
        replaced = {key for key, _ in own}
        headers = (*(h for h in self.headers if h[0] not in replaced), *own)
        timeout = options.get("timeout", self.timeout)
        with use_extensions(self.requested_extensions(options)), observe_extensions() as records:
            call = getattr(self._stub, method)(request, metadata=headers, timeout=timeout)
        return call, records

    async def _unary(self, method: str, request: Any, options: CallOptions) -> Result[Any]:
        call, records = self._start(method, request, options)
        value = await call
        return Result(value, records[0].activated if records else ())

    def _stream(self, method: str, request: Any, options: CallOptions) -> EventStream:
        call, records = self._start(method, request, options)
        return EventStream(call, records)

    def _send_request(
        self,
        message: a2a_pb2.Message | str,
        metadata: Mapping[str, Any] | None,
        configuration: a2a_pb2.SendMessageConfiguration | None,
    ) -> a2a_pb2.SendMessageRequest:
        if isinstance(message, str):
            message = text_message(message)
        request = a2a_pb2.SendMessageRequest(tenant=self.tenant, message=message, configuration=configuration)
        if metadata:
            request.metadata.update(dict(metadata))
        return request

    async def send_message(
        self,
        message: a2a_pb2.Message | str,
        *,
        metadata: Mapping[str, Any] | None = None,
        configuration: a2a_pb2.SendMessageConfiguration | None = None,
        **options: Unpack[CallOptions],
    ) -> Result[a2a_pb2.SendMessageResponse]:
        """SendMessage; a plain string becomes a user text message. `metadata` is the request's."""
        return await self._unary("SendMessage", self._send_request(message, metadata, configuration), options)

    def send_streaming_message(
        self,
        message: a2a_pb2.Message | str,
        *,
        metadata: Mapping[str, Any] | None = None,
        configuration: a2a_pb2.SendMessageConfiguration | None = None,
        **options: Unpack[CallOptions],
    ) -> EventStream:
        """SendStreamingMessage: iterate the returned stream for its events."""
        return self._stream("SendStreamingMessage", self._send_request(message, metadata, configuration), options)

    async def get_task(
        self, task_id: str, *, history_length: int | None = None, **options: Unpack[CallOptions]
    ) -> Result[a2a_pb2.Task]:
        request = a2a_pb2.GetTaskRequest(tenant=self.tenant, id=task_id, history_length=history_length)
        return await self._unary("GetTask", request, options)

    async def list_tasks(
        self,
        *,
        context_id: str = "",
        status: int = a2a_pb2.TASK_STATE_UNSPECIFIED,
        page_size: int | None = None,
        page_token: str = "",
        history_length: int | None = None,
        include_artifacts: bool | None = None,
        **options: Unpack[CallOptions],
    ) -> Result[a2a_pb2.ListTasksResponse]:
        request = a2a_pb2.ListTasksRequest(
            tenant=self.tenant,
            context_id=context_id,
            status=status,  # type: ignore[arg-type]
            page_size=page_size,
            page_token=page_token,
            history_length=history_length,
            include_artifacts=include_artifacts,
        )
        return await self._unary("ListTasks", request, options)

    async def cancel_task(self, task_id: str, **options: Unpack[CallOptions]) -> Result[a2a_pb2.Task]:
        return await self._unary("CancelTask", a2a_pb2.CancelTaskRequest(tenant=self.tenant, id=task_id), options)

    def subscribe(
        self, task_id: str, *, after: int | None = None, resume: bool = False, **options: Unpack[CallOptions]
    ) -> EventStream:
        """SubscribeToTask: the task's snapshot, then its events until it settles.

        With `after` or `resume` the call activates the stream-resume extension: each event carries its
        number (`a2a_grpc.resume.event_seq`). `after=N` starts after event N: the task as it is now,
        then exactly the events numbered above N (a final task's stream replays them and ends).
        `resume=True` subscribes again after the last event received when the stream is cut with
        UNAVAILABLE (a restarted or failed-over server), up to MAX_RESUME_ATTEMPTS times in a row.
        """
        request = a2a_pb2.SubscribeToTaskRequest(tenant=self.tenant, id=task_id)
        if after is None and not resume:
            return self._stream("SubscribeToTask", request, options)

        def start(after: int | None) -> tuple[Any, list[ResponseExtensions]]:
            cursor = ((STREAM_AFTER_HEADER, str(after)),) if after is not None else ()
            resuming: CallOptions = {
                **options,
                "extra_extensions": (*options.get("extra_extensions", ()), RESUME_EXTENSION_URI),
                "headers": (*options.get("headers", ()), *cursor),
            }
            return self._start("SubscribeToTask", request, resuming)

        return ResumingStream(start, after) if resume else EventStream(*start(after))

    async def get_extended_card(self, **options: Unpack[CallOptions]) -> Result[a2a_pb2.AgentCard]:
        """The extended card; with a `card_verifier`, checked as the public card is (its jku is followed to the
        public card's origin, when a card URL is known)."""
        request = a2a_pb2.GetExtendedAgentCardRequest(tenant=self.tenant)
        result: Result[a2a_pb2.AgentCard] = await self._unary("GetExtendedAgentCard", request, options)
        if self.card_verifier is not None:
            await self.card_verifier.verify(result.value, self.card_url or "")
        return result

    async def get_card(self, *, refresh: bool = False) -> a2a_pb2.AgentCard:
        """The public agent card, served over HTTP (gRPC has no RPC for it in A2A 1.0)."""
        if self.card is not None and not refresh:
            return self.card
        if self.card_url is None:
            raise AgentCardError(
                f"the public agent card is served over HTTP; no card URL is known for {self.target} "
                "(connect with the card URL, or pass card_url=)"
            )
        self.card = await fetch_agent_card(self.card_url, tls=self.tls, verifier=self.card_verifier)
        return self.card

    async def create_push_config(
        self, config: a2a_pb2.TaskPushNotificationConfig, **options: Unpack[CallOptions]
    ) -> Result[a2a_pb2.TaskPushNotificationConfig]:
        if self.tenant and not config.tenant:
            config.tenant = self.tenant
        return await self._unary("CreateTaskPushNotificationConfig", config, options)

    async def get_push_config(
        self, task_id: str, config_id: str, **options: Unpack[CallOptions]
    ) -> Result[a2a_pb2.TaskPushNotificationConfig]:
        request = a2a_pb2.GetTaskPushNotificationConfigRequest(tenant=self.tenant, task_id=task_id, id=config_id)
        return await self._unary("GetTaskPushNotificationConfig", request, options)

    async def list_push_configs(
        self, task_id: str, *, page_size: int = 0, page_token: str = "", **options: Unpack[CallOptions]
    ) -> Result[a2a_pb2.ListTaskPushNotificationConfigsResponse]:
        request = a2a_pb2.ListTaskPushNotificationConfigsRequest(
            tenant=self.tenant, task_id=task_id, page_size=page_size, page_token=page_token
        )
        return await self._unary("ListTaskPushNotificationConfigs", request, options)

    async def delete_push_config(
        self, task_id: str, config_id: str, **options: Unpack[CallOptions]
    ) -> Result[empty_pb2.Empty]:
        request = a2a_pb2.DeleteTaskPushNotificationConfigRequest(tenant=self.tenant, task_id=task_id, id=config_id)
        return await self._unary("DeleteTaskPushNotificationConfig", request, options)
