"""Calls to a service or method this server does not serve: UNIMPLEMENTED naming what it does serve.

grpc's own answer ("Method not found!") tells a caller nothing, and no layer of ours would see the call.
Registered last, this handler takes every call no service took, whatever its kind (a stream-stream handler
answers unary and streaming callers alike, before reading a request), admits its caller as the chain admits
any call (`ServerChain.admit_caller`: authentication, the failed-authentication throttle, the request rate,
so that a bad credential is UNAUTHENTICATED and a flood RATE_LIMITED here too), refuses it with a
MethodNotFoundError naming the services and their A2A versions, and logs it in the access log. Its metrics share one method
label, so that callers cannot mint labels.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from a2a_grpc.arrival import Arrival
from a2a_grpc.auth import Principal
from a2a_grpc.errors import A2AError, InternalError, MethodNotFoundError
from a2a_grpc.interceptors.server.errors import abort
from a2a_grpc.telemetry import AccessLog, Metrics
from a2a_grpc.telemetry.outcome import outcome_of

log = logging.getLogger(__name__)

METRICS_METHOD = "unknown"  # the method label of every call this handler answers
MAX_METHOD_CHARS = 200

AdmitCaller = Callable[[Arrival, Any], Awaitable[Principal]]  # (arrival, grpc context) -> principal, or the refusal


class UnknownMethods(grpc.GenericRpcHandler):  # type: ignore[misc]
    """`services`: (service name, the A2A version it speaks), the ones this server serves; `admit_caller`: the
    chain's admission of a caller, which every call passes before it is refused (None: no check)."""

    def __init__(
        self,
        services: Sequence[tuple[str, str]],
        access_log: AccessLog | None,
        metrics: Metrics | None,
        admit_caller: AdmitCaller | None = None,
    ) -> None:
        self._speaks = " and ".join(f"A2A {version} as {service}" for service, version in services)
        self._services = ",".join(service for service, _ in services)
        self._access_log = access_log
        self._metrics = metrics.method(METRICS_METHOD) if metrics is not None else None
        self._admit_caller = admit_caller

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = _shown(handler_call_details.method)

        async def refuse(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            await self._refuse(method, context)
            yield  # never reached: a generator, which grpc.aio serves as a response stream

        return grpc.stream_stream_rpc_method_handler(refuse)

    def _refusal(self, method: str) -> MethodNotFoundError:
        service = method.lstrip("/").rpartition("/")[0] or method
        return MethodNotFoundError(
            f"this agent does not serve {method}: it speaks {self._speaks}",
            metadata={"method": method, "service": service, "services": self._services},
        )

    async def _refuse(self, method: str, context: Any) -> None:
        started = time.perf_counter()
        arrival = Arrival.of(context)
        refusal: A2AError = self._refusal(method)
        if self._admit_caller is not None:
            try:
                await self._admit_caller(arrival, context)
            except A2AError as error:
                refusal = error
            except Exception:  # as the chain's errors layer does: logged, and INTERNAL with a generic message
                log.exception("unexpected error admitting a call to %s", method)
                refusal = InternalError("internal error")
        outcome = outcome_of(refusal, arrival)
        seconds = time.perf_counter() - started
        if self._metrics is not None:
            self._metrics.finished(outcome, seconds, None)
        if self._access_log is not None:
            self._access_log.write(method, arrival, None, outcome, seconds, None, None)
        await abort(context, refusal)


def _shown(method: str | bytes) -> str:
    text = method.decode(errors="replace") if isinstance(method, bytes) else str(method)
    return text if len(text) <= MAX_METHOD_CHARS else text[:MAX_METHOD_CHARS] + "..."
