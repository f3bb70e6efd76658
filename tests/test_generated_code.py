"""Drift checks between protos/ (a2a.proto: A2A 1.0; v0_3/a2a.proto: A2A 0.3) and the generated code in
a2a_grpc/generated."""

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import google.api
import grpc_tools
import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03_pb2
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_pb2_grpc

REPO_ROOT = Path(__file__).resolve().parent.parent
GENERATED_DIR = REPO_ROOT / "a2a_grpc" / "generated"
GENERATED_FILES = tuple(
    f"{package}{name}" for package in ("", "v0_3/") for name in ("a2a_pb2.py", "a2a_pb2.pyi", "a2a_pb2_grpc.py")
)
PROTOS = [("a2a.proto", a2a_pb2), ("v0_3/a2a.proto", v03_pb2)]


def _include_paths() -> list[str]:
    bundled = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    googleapis = next(
        os.path.dirname(os.path.dirname(p))
        for p in google.api.__path__
        if os.path.isfile(os.path.join(p, "annotations.proto"))
    )
    return [str(REPO_ROOT / "protos"), bundled, googleapis]


def _default_json_name(name: str) -> str:
    # protoc's default: drop underscores, upper-case the following letter.
    parts = name.split("_")
    return parts[0] + "".join(x[:1].upper() + x[1:] for x in parts[1:])


def _strip_default_json_names(fdp: descriptor_pb2.FileDescriptorProto) -> None:
    # --descriptor_set_out fills in every field's json_name; the serialized
    # descriptor embedded by --python_out keeps only explicit ones.
    def walk(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for msg in messages:
            for field in list(msg.field) + list(msg.extension):
                if field.json_name == _default_json_name(field.name):
                    field.ClearField("json_name")
            walk(msg.nested_type)

    walk(fdp.message_type)
    for field in fdp.extension:
        if field.json_name == _default_json_name(field.name):
            field.ClearField("json_name")


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        [str(REPO_ROOT / "scripts" / "gen-protos"), str(tmp_path)],
        check=True,
        env=env,
        cwd=REPO_ROOT,
    )
    for name in GENERATED_FILES:
        fresh = (tmp_path / name).read_bytes()
        committed = (GENERATED_DIR / name).read_bytes()
        assert fresh == committed, f"a2a_grpc/generated/{name} is stale; run scripts/gen-protos"


@pytest.mark.parametrize(("proto", "module"), PROTOS, ids=[proto for proto, _ in PROTOS])
def test_descriptor_matches_proto(tmp_path: Path, proto: str, module: ModuleType) -> None:
    out = tmp_path / "a2a.pb"
    args = ["protoc"]
    args += [f"-I{p}" for p in _include_paths()]
    args += [f"--descriptor_set_out={out}", proto]
    assert protoc.main(args) == 0, f"protoc failed on protos/{proto}"

    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    assert len(fds.file) == 1
    from_proto = fds.file[0]
    _strip_default_json_names(from_proto)
    from_module = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert from_proto == from_module, f"{module.__name__} differs from protos/{proto}; run scripts/gen-protos"


def test_service_methods() -> None:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert service.full_name == "lf.a2a.v1.A2AService"
    expected = {
        "SendMessage": False,
        "SendStreamingMessage": True,
        "GetTask": False,
        "ListTasks": False,
        "CancelTask": False,
        "SubscribeToTask": True,
        "CreateTaskPushNotificationConfig": False,
        "GetTaskPushNotificationConfig": False,
        "ListTaskPushNotificationConfigs": False,
        "GetExtendedAgentCard": False,
        "DeleteTaskPushNotificationConfig": False,
    }
    assert [m.name for m in service.methods] == list(expected)

    proto = descriptor_pb2.ServiceDescriptorProto()
    service.CopyToProto(proto)
    for method in proto.method:
        assert method.client_streaming is False, method.name
        assert method.server_streaming is expected[method.name], method.name

    # The method paths the generated stubs/servicers actually use on the wire.
    source = Path(a2a_pb2_grpc.__file__).read_text()
    for name in expected:
        assert f"'/lf.a2a.v1.A2AService/{name}'" in source, name


def test_the_v03_service_is_a2a_v1_beside_lf_a2a_v1() -> None:
    service = v03_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert service.full_name == "a2a.v1.A2AService"
    assert v03_pb2.DESCRIPTOR.name == "v0_3/a2a.proto", "a file name of its own: the pool holds both"
    streaming = {m.name: m.server_streaming for m in service.methods}
    assert streaming == {
        "SendMessage": False,
        "SendStreamingMessage": True,
        "GetTask": False,
        "CancelTask": False,
        "TaskSubscription": True,
        "CreateTaskPushNotificationConfig": False,
        "GetTaskPushNotificationConfig": False,
        "ListTaskPushNotificationConfig": False,
        "GetAgentCard": False,
        "DeleteTaskPushNotificationConfig": False,
    }
    source = Path(v03_pb2_grpc.__file__).read_text()
    for name in streaming:
        assert f"'/a2a.v1.A2AService/{name}'" in source, name
