"""The deployment files carry the essentials: the Dockerfile (multi-stage, the virtualenv only, a non-root
user, `a2a-grpc serve` on 0.0.0.0), .dockerignore, the Kubernetes manifest (gRPC probes on the gRPC port,
a grace period above the drain's, the card from a ConfigMap, the store URL from a Secret, ports matching
the image) and the Envoy example (TLS in front, HTTP/2 to the gRPC port). These machines run no container
engine: the files are checked as text, and the image is built only where `docker info` works."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from a2a_grpc.card import GRPC_BINDING
from a2a_grpc.protocol import AGENT_CARD_PATH, SERVICE_NAME
from a2a_grpc.server import LIVENESS_SERVICE, A2AServer, ServerSettings

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
MANIFEST = REPO / "deploy" / "kubernetes.yaml"
ENVOY = REPO / "deploy" / "envoy.yaml"
VENV = "/opt/a2a-grpc"
BASE_IMAGE = "python:3.11-slim"


# -- the Dockerfile, read as Docker reads it (continuations joined, comments dropped, ARGs substituted) ----


@dataclass
class Stage:
    image: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for name, args in self.instructions if name == keyword]

    def env(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for args in self.all("ENV"):
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                found[key] = value
        return found


def instructions(text: str) -> Iterator[tuple[str, str]]:
    logical = ""
    for line in text.splitlines():
        if not logical and line.lstrip().startswith("#"):
            continue  # a comment (the parser directive `# syntax=` too)
        if logical and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        if logical.strip():
            keyword, _, args = logical.strip().partition(" ")
            yield keyword.upper(), args.strip()
        logical = ""


def stages() -> list[Stage]:
    args: dict[str, str] = {}
    found: list[Stage] = []
    for keyword, rest in instructions(DOCKERFILE.read_text()):
        if keyword == "ARG" and not found:
            key, _, value = rest.partition("=")
            args[key] = value
        elif keyword == "FROM":
            image, _, name = rest.partition(" AS ")
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), image.strip())
            found.append(Stage(image, name.strip()))
        else:
            assert found, f"{keyword} before the first FROM"
            found[-1].instructions.append((keyword, rest))
    return found


def final_stage() -> Stage:
    return stages()[-1]


def host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host, int(port)


def image_ports() -> tuple[int, int]:
    """The gRPC and the HTTP port the image listens on."""
    env = final_stage().env()
    return host_port(env["A2A_GRPC_LISTEN"])[1], host_port(env["A2A_GRPC_HTTP_LISTEN"])[1]


def test_the_image_is_built_in_two_stages_and_keeps_the_virtualenv_only() -> None:
    builder, *_, final = stages()
    assert len(stages()) >= 2
    assert builder.name == "builder"
    assert builder.image == final.image == BASE_IMAGE  # the virtualenv's python is the base image's
    install = " ".join(builder.all("RUN"))
    assert f"{VENV}/bin/pip install" in install and ".[postgres,fast]" in install
    assert final.all("COPY") == [f"--from=builder {VENV} {VENV}"]  # no source tree, no build tools
    assert not final.all("ADD")
    assert "pip install" not in " ".join(final.all("RUN"))
    assert final.env()["PATH"].startswith(f"{VENV}/bin:")


def test_the_image_runs_serve_as_a_non_root_user_listening_on_every_interface() -> None:
    final = final_stage()
    [user] = final.all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root user, which runAsNonRoot can check"
    assert f"--uid {uid}" in " ".join(final.all("RUN"))
    [entrypoint] = final.all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["a2a-grpc", "serve"]  # exec form: the server gets SIGTERM itself
    env = final.env()
    assert host_port(env["A2A_GRPC_LISTEN"])[0] == "0.0.0.0"
    assert host_port(env["A2A_GRPC_HTTP_LISTEN"])[0] == "0.0.0.0"
    exposed = {int(port.split("/")[0]) for args in final.all("EXPOSE") for port in args.split()}
    assert exposed == set(image_ports())
    assert final.all("STOPSIGNAL") in ([], ["SIGTERM"])


def dockerignored(name: str, patterns: list[str]) -> bool:
    """Whether a top-level entry of the context is left out (the last matching pattern decides)."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if fnmatch.fnmatch(name, pattern.removeprefix("!").rstrip("/")):
            ignored = not negated
    return ignored


def test_dockerignore_keeps_what_the_image_copies_and_leaves_out_the_rest() -> None:
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    builder = stages()[0]
    copied = [source for args in builder.all("COPY") for source in shlex.split(args)[:-1]]
    assert copied
    for source in copied:
        assert not dockerignored(source.split("/")[0], patterns), f"{source} is copied but ignored"
    for local in (".venv", ".git", "tests", "bench", ".a2a-grpc", "a2a_grpc.egg-info", ".mypy_cache"):
        assert dockerignored(local, patterns), f"{local} would be sent to the build"


# -- the Kubernetes manifest -------------------------------------------------------------------------


def manifest() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [doc for doc in manifest() if doc["kind"] == kind and name in (None, doc["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def container() -> dict[str, Any]:
    [server] = one("Deployment")["spec"]["template"]["spec"]["containers"]
    return server  # type: ignore[no-any-return]


def container_env() -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in container().get("env", [])}


def container_ports() -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container()["ports"]}


def test_the_manifest_ports_match_the_image_and_the_listen_addresses() -> None:
    grpc_port, http_port = image_ports()
    assert container_ports() == {"grpc": grpc_port, "http": http_port}
    env = container_env()
    for variable, port in (("A2A_GRPC_LISTEN", grpc_port), ("A2A_GRPC_HTTP_LISTEN", http_port)):
        if variable in env:  # else the image's value holds
            assert host_port(env[variable]["value"]) == ("0.0.0.0", port)
    pod_labels = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    for service in (doc for doc in manifest() if doc["kind"] == "Service"):
        assert service["spec"]["selector"].items() <= pod_labels.items()
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in container_ports() or port["targetPort"] in container_ports().values()


def test_the_probes_are_grpc_health_checks_on_the_grpc_port() -> None:
    grpc_port = container_ports()["grpc"]
    server = container()
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        check = server[probe]["grpc"]
        assert check["port"] == grpc_port, probe
    assert server["livenessProbe"]["grpc"]["service"] == LIVENESS_SERVICE  # SERVING while the process answers
    assert server["startupProbe"]["grpc"]["service"] == LIVENESS_SERVICE
    assert server["readinessProbe"]["grpc"].get("service", "") in ("", SERVICE_NAME)  # follows the store


def test_the_pod_grace_period_is_above_the_drain_grace() -> None:
    pod = one("Deployment")["spec"]["template"]["spec"]
    env = container_env()
    grace = float(env["A2A_GRPC_GRACE"]["value"]) if "A2A_GRPC_GRACE" in env else ServerSettings().grace_seconds
    pre_stop = container().get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    waits = float(pre_stop[1]) if pre_stop[:1] == ["sleep"] else 0.0  # SIGTERM comes after preStop
    assert pod["terminationGracePeriodSeconds"] > waits + grace


def test_the_pod_runs_as_the_image_user_without_privileges() -> None:
    pod = one("Deployment")["spec"]["template"]["spec"]
    [user] = final_stage().all("USER")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(user.split(":")[0])
    assert container()["securityContext"]["allowPrivilegeEscalation"] is False


def test_replicas_take_the_postgresql_url_from_a_secret() -> None:
    assert one("Deployment")["spec"]["replicas"] >= 2
    store = container_env()["A2A_GRPC_STORE"]
    assert "value" not in store  # never in the manifest's plain text
    ref = store["valueFrom"]["secretKeyRef"]
    secret = one("Secret", ref["name"])
    url = secret.get("stringData", {}).get(ref["key"])
    assert url is not None and url.startswith("postgresql://"), "replicas need a store they share"


def test_the_card_comes_from_a_configmap_and_is_a_valid_card(tmp_path: Path) -> None:
    card_path = Path(container_env()["A2A_GRPC_CARD"]["value"])
    pod = one("Deployment")["spec"]["template"]["spec"]
    [mount] = [m for m in container()["volumeMounts"] if card_path.parent == Path(m["mountPath"])]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config_map = one("ConfigMap", volume["configMap"]["name"])
    text = config_map["data"][card_path.name]
    local = tmp_path / card_path.name
    local.write_text(text)
    settings = ServerSettings(listen="0.0.0.0:50051", http_listen="", card_path=str(local), store_url="memory")
    server = A2AServer(settings)  # loads and checks the card as `a2a-grpc serve` does
    interfaces = [i for i in server.card.supported_interfaces if i.protocol_binding == GRPC_BINDING]
    assert [i.protocol_version for i in interfaces] == ["1.0", "0.3"]
    for interface in interfaces:
        assert not interface.url.startswith("0.0.0.0"), "the card must name the public address, not the listen one"


# -- Envoy in front --------------------------------------------------------------------------------


def envoy() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(ENVOY.read_text())
    return config


def cluster_port(name: str) -> tuple[str, int]:
    [cluster] = [c for c in envoy()["static_resources"]["clusters"] if c["name"] == name]
    [group] = cluster["load_assignment"]["endpoints"]
    [endpoint] = group["lb_endpoints"]
    address = endpoint["endpoint"]["address"]["socket_address"]
    return address["address"], address["port_value"]


def test_envoy_terminates_tls_and_sends_http2_to_the_grpc_port() -> None:
    [listener] = envoy()["static_resources"]["listeners"]
    [chain] = listener["filter_chains"]
    tls = chain["transport_socket"]["typed_config"]
    assert tls["@type"].endswith("tls.v3.DownstreamTlsContext")
    assert "h2" in tls["common_tls_context"]["alpn_protocols"]
    [manager] = chain["filters"]
    routes = manager["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
    by_cluster = {route["route"]["cluster"]: route for route in routes}
    assert AGENT_CARD_PATH.startswith(by_cluster["a2a_http"]["match"]["prefix"])
    assert by_cluster["a2a_grpc"]["route"]["timeout"] == "0s"  # long streams are not cut at Envoy's 15 s default

    clusters = {c["name"]: c for c in envoy()["static_resources"]["clusters"]}
    upstream = clusters["a2a_grpc"]["typed_extension_protocol_options"]
    [options] = upstream.values()
    assert "http2_protocol_options" in options["explicit_http_config"]
    assert "grpc_health_check" in clusters["a2a_grpc"]["health_checks"][0]

    ports = {port["name"]: port["port"] for port in one("Service", "a2a-grpc-pods")["spec"]["ports"]}
    assert one("Service", "a2a-grpc-pods")["spec"]["clusterIP"] == "None"  # one address per pod
    for cluster, port in (("a2a_grpc", ports["grpc"]), ("a2a_http", ports["http"])):
        host, port_value = cluster_port(cluster)
        assert host.split(".")[0] == "a2a-grpc-pods"
        assert port_value == port
