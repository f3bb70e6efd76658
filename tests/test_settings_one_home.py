"""Issue 29, finding 9: every default of `a2a-grpc serve` has one home, a2a_grpc.settings.defaults, which the
settings table, ServerSettings and every part that takes a setting read (`Limits()` once throttled failed
authentication at 0 a second where serve did at 10); and `config check` makes exactly the checks `serve` makes
before it starts (it once said `ok` to `workers = 4` on a SQLite store, which serve refuses)."""

from __future__ import annotations

import ast
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from process import REPO, run_serve

from a2a_grpc.auth import JwtSettings
from a2a_grpc.auth.tokens import JwtVerifier
from a2a_grpc.cli import main
from a2a_grpc.interceptors.server import (
    A2AServerInterceptor,
    A2ASyncServerInterceptor,
    Limits,
    ServerChain,
    VersionCheck,
)
from a2a_grpc.interceptors.server.extensions import ExtensionNegotiator
from a2a_grpc.push.sender import PushSender
from a2a_grpc.push.service import PushSettings
from a2a_grpc.push.worker import DeliverySettings
from a2a_grpc.server import ServerSettings
from a2a_grpc.servicer import A2AServicer
from a2a_grpc.settings import FILE_SETTINGS
from a2a_grpc.store import PostgresStore, open_store
from a2a_grpc.tasks import TaskLimits, TaskManager
from a2a_grpc.tasks.replicas import ReplicaKeeper
from a2a_grpc.tasks.subscriber import Subscriber
from a2a_grpc.validation import validate_send

# (a part, its parameter): the ServerSettings field of the setting it takes
PART_DEFAULTS: dict[tuple[Callable[..., Any], str], str] = {
    (Limits, "requests_per_second"): "max_requests_per_second",
    (Limits, "auth_failures_per_second"): "max_auth_failures_per_second",
    (Limits, "max_streams_per_caller"): "max_streams_per_caller",
    (Limits, "max_streams"): "max_streams",
    (ServerChain, "missing_version_means"): "missing_version_means",
    (ServerChain, "negotiate_extensions"): "negotiate_extensions",
    (ServerChain, "echo_unary_headers"): "echo_unary_headers",
    (ServerChain, "max_extensions_per_call"): "max_extensions_per_call",
    (ExtensionNegotiator, "max_extensions"): "max_extensions_per_call",
    (A2AServerInterceptor, "missing_version_means"): "missing_version_means",
    (A2AServerInterceptor, "echo_unary_headers"): "echo_unary_headers",
    (A2AServerInterceptor, "max_extensions_per_call"): "max_extensions_per_call",
    (A2ASyncServerInterceptor, "missing_version_means"): "missing_version_means",
    (A2ASyncServerInterceptor, "echo_unary_headers"): "echo_unary_headers",
    (A2ASyncServerInterceptor, "max_extensions_per_call"): "max_extensions_per_call",
    (A2AServicer, "max_list_page_bytes"): "max_list_page_bytes",
    (A2AServicer, "max_extension_payload_bytes"): "max_extension_payload_bytes",
    (A2AServicer, "max_parts"): "max_parts",
    (A2AServicer, "enforce_input_modes"): "enforce_input_modes",
    (validate_send, "max_parts"): "max_parts",
    (TaskManager, "subscriber_buffer_bytes"): "max_subscriber_buffer_bytes",
    (TaskManager, "lease_seconds"): "lease_seconds",
    (TaskManager, "poll_seconds"): "poll_seconds",
    (TaskManager, "event_retention_seconds"): "event_retention_seconds",
    (ReplicaKeeper, "lease_seconds"): "lease_seconds",
    (ReplicaKeeper, "poll_seconds"): "poll_seconds",
    (Subscriber, "max_bytes"): "max_subscriber_buffer_bytes",
    (TaskLimits, "max_history"): "max_history_per_task",
    (TaskLimits, "max_artifact_bytes"): "max_artifact_bytes_per_task",
    (TaskLimits, "max_push_configs"): "max_push_configs_per_task",
    (TaskLimits, "max_history_bytes"): "max_history_bytes_per_task",
    (VersionCheck, "missing_means"): "missing_version_means",
    (open_store, "pool_size"): "store_pool_size",
    (PostgresStore, "pool_size"): "store_pool_size",
}
# settings that no ServerSettings field holds as it is: the default of the part that takes them
TABLE_DEFAULTS = {
    "push_allow_http": PushSettings().allow_http,
    "push_timeout": PushSettings().timeout_seconds,
    "push_status_only": DeliverySettings().status_only,
    "push_max_attempts": DeliverySettings().max_attempts,
    "push_max_age": DeliverySettings().max_age_seconds,
    "jwt_leeway": JwtSettings().leeway_seconds,
    "unary_echo": "headers" if ServerSettings().echo_unary_headers else "trailers",
}


@pytest.mark.parametrize(
    ("part", "parameter"), list(PART_DEFAULTS), ids=[f"{part.__name__}.{name}" for part, name in PART_DEFAULTS]
)
def test_settings_one_home_every_part_defaults_to_what_serve_runs_with(
    part: Callable[..., Any], parameter: str
) -> None:
    field = PART_DEFAULTS[part, parameter]
    default = inspect.signature(part).parameters[parameter].default
    assert default == getattr(ServerSettings(), field), f"{part.__name__}({parameter}=) and serve differ"


def test_settings_one_home_a_limits_of_its_defaults_throttles_failed_authentication_as_serve_does() -> None:
    assert Limits().auth_throttled
    assert not Limits().rate_limited


@pytest.mark.parametrize("key", sorted(TABLE_DEFAULTS))
def test_settings_one_home_the_table_and_the_parts_agree_on_what_no_field_holds(key: str) -> None:
    assert FILE_SETTINGS[key].default == TABLE_DEFAULTS[key]


def test_settings_one_home_a_jwt_verifier_allows_the_leeway_serve_does() -> None:
    assert inspect.signature(JwtVerifier).parameters["leeway_seconds"].default == FILE_SETTINGS["jwt_leeway"].default


def test_settings_one_home_a_push_sender_waits_as_long_as_serve_does() -> None:
    assert inspect.signature(PushSender).parameters["timeout_seconds"].default == FILE_SETTINGS["push_timeout"].default


def _defaults_named(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """Each `default_value=` of the table's rows and each field default of ServerSettings: (name, value)."""
    found: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "default_value":
            found.append(("default_value", node.value))
        if isinstance(node, ast.ClassDef) and node.name == "ServerSettings":
            found += [
                (statement.target.id, statement.value)
                for statement in node.body
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value
            ]
    return found


def _names_a_default(value: ast.expr) -> bool:
    """`defaults.NAME`, or None (unset)."""
    if isinstance(value, ast.Constant):
        return value.value is None
    return isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "defaults"


def test_settings_one_home_no_setting_default_is_written_out_a_second_time() -> None:
    """The table's rows and ServerSettings' fields that a setting sets name a2a_grpc.settings.defaults' constant,
    never a literal of their own."""
    settings_fields = {setting.field for setting in FILE_SETTINGS.values() if setting.field}
    sources = [REPO / "a2a_grpc" / "settings" / name for name in ("serving.py", "running.py")]
    sources.append(Path(str(inspect.getsourcefile(ServerSettings))))  # wherever the class is written
    for source in sources:
        for name, value in _defaults_named(ast.parse(source.read_text())):
            if name == "default_value" or name in settings_fields:
                assert _names_a_default(value), f"{source.name}: {name} = {ast.unparse(value)}"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("lines", "refusal"),
    [
        ('workers = 4\nstore = "sqlite:///tasks.db"\n', "--workers 4 needs a store all processes share"),
        ('card_signing_key = ["no-such-key.pem"]\nstore = "memory"\n', "no-such-key.pem"),
    ],
    ids=["workers on sqlite", "a missing card signing key"],
)
def test_settings_one_home_config_check_refuses_what_serve_refuses_with_the_same_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lines: str, refusal: str
) -> None:
    for name in [name for name in os.environ if name.startswith("A2A_GRPC_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "a2a.toml", f'listen = "127.0.0.1:0"\nhttp_listen = ""\n{lines}')
    code = main(["config", "check", str(config)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    [checked] = err.splitlines()
    assert checked.startswith("a2a-grpc: ") and refusal in checked, checked
    served = run_serve(["--config", str(config)], cwd=tmp_path)
    assert served.returncode == 2
    assert served.stderr.splitlines() == [checked], "config check prints the line serve prints"
