"""The HTTP+JSON routes, read from the `google.api.http` annotations of the A2A service's methods.

Each method's annotation gives an HTTP verb, a path template (`/tasks/{id=*}:cancel`) and whether the body
is the request (`body: "*"`); each additional binding is the same route under `/{tenant}/`. A template's
variables are fields of the request message that the path fills. The spec's prose names POST for
`/tasks/{id}:subscribe` where the proto says GET, and the reference SDK's client sends POST: both are served.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.api import annotations_pb2, http_pb2
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

_VARIABLE = re.compile(r"\{([a-z_]+)(?:=\*)?\}")
# what the spec's prose serves besides the proto's annotation: (method, verb the annotation says) -> also this verb
EXTRA_VERBS = {("SubscribeToTask", "GET"): "POST"}


@dataclass(frozen=True)
class Route:
    """`template` as the proto writes it; `path` in aiohttp's form; `fields` the request fields it fills."""

    method: MethodDescriptor
    verb: str
    template: str
    path: str
    fields: tuple[str, ...]
    body: bool  # the request body is the request message

    @property
    def literal_length(self) -> int:
        """How much of the template is fixed text: a longer one is tried first, so `/tasks/{id}:cancel` wins over
        `/tasks/{id}` for the same path."""
        return len(_VARIABLE.sub("", self.template))


def service_routes(service: ServiceDescriptor) -> list[Route]:
    """Every route of `service`'s annotations (and the extra verbs), the most specific first."""
    routes = [route for method in service.methods for route in method_routes(method)]
    return sorted(routes, key=lambda route: -route.literal_length)


def method_routes(method: MethodDescriptor) -> list[Route]:
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    routes: list[Route] = []
    for binding in (rule, *rule.additional_bindings):
        verb, template = _pattern(binding)
        for each in (verb, *([EXTRA_VERBS[method.name, verb]] if (method.name, verb) in EXTRA_VERBS else [])):
            fields = tuple(_VARIABLE.findall(template))
            path = _VARIABLE.sub(lambda variable: "{" + variable.group(1) + ":[^/]+}", template)
            routes.append(Route(method, each, template, path, fields, binding.body == "*" or each == "POST"))
    return routes


def _pattern(rule: http_pb2.HttpRule) -> tuple[str, str]:
    kind = rule.WhichOneof("pattern")
    if kind is None or kind == "custom":
        raise ValueError(f"unsupported google.api.http pattern: {kind}")
    return kind.upper(), str(getattr(rule, kind))


def route_table(service: ServiceDescriptor) -> str:
    """The routes as docs/bindings.md lists them (a Markdown table, in the proto's order of methods)."""
    lines = ["| method | HTTP | path | request from |", "|---|---|---|---|"]
    for method in service.methods:
        for route in method_routes(method):
            source = "body" if route.body else "query"
            stream = " (SSE)" if method.server_streaming else ""
            lines.append(f"| `{method.name}`{stream} | {route.verb} | `{route.template}` | {source} |")
    return "\n".join(lines) + "\n"
