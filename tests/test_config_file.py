"""The config file of `a2a-grpc serve` (`--config FILE`, A2A_GRPC_CONFIG): a server run from one, the precedence
default < file < environment < flag, the errors naming the key and its line, and `a2a-grpc config check` and
`config show` (the effective settings, secrets redacted)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import grpc
import pytest
from process import (
    CARD,
    START_SECONDS,
    Ports,
    get_task,
    health_status,
    http_get,
    launch,
    run_serve,
    send_text,
    serve_process,
)
from test_readme import section_lines

from a2a_grpc.cli import main
from a2a_grpc.config import key_line
from a2a_grpc.generated import a2a_pb2

TOKEN = "s3cret-token"
PASSWORD = "pg-pa55word"
SERVING_LINE = re.compile(r"serving A2A on (\S+) \(card on http://(\S+?)/\.well-known/agent-card\.json\)")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No A2A_GRPC_* setting of the machine's leaks into the in-process runs."""
    for name in [name for name in os.environ if name.startswith("A2A_GRPC_")]:
        if name != "A2A_GRPC_TEST_POSTGRES_URL":
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def forget_agent_modules() -> Iterator[None]:
    """The agent modules `config check` imported from a test's folder are imported afresh by the next test."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("config_check_", "mypackage")):
            del sys.modules[name]


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`a2a-grpc ARGV` in this process: its exit status, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def shown(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], dict[str, str]]:
    """`a2a-grpc config show ARGV`: the settings it prints (read back as TOML), and where each came from."""
    code, out, err = run(capsys, "config", "show", *argv)
    assert code == 0, err
    sources = {
        line.split(" = ", 1)[0]: line.rsplit("  # ", 1)[1]
        for line in out.splitlines()
        if line and not line.startswith("#")
    }
    return tomllib.loads(out), sources


def test_a_server_serves_the_ports_store_card_and_tokens_its_config_file_sets(tmp_path: Path) -> None:
    ports = Ports.free()
    store = tmp_path / "file-store" / "tasks.db"
    (tmp_path / "card.json").write_text(json.dumps(CARD))
    config = write_config(
        tmp_path / "a2a.toml",
        f"""# every value as TOML types it
listen = "{ports.grpc_target}"
http_listen = "{ports.http_target}"
store = "sqlite:///{store}"
card = "card.json"  # relative to the working directory, as the flag's
auth_token = ["{TOKEN}=alice"]
grace = 1
""",
    )
    with serve_process(
        tmp_path / "logs", "--config", str(config), ports=ports, ports_via="none", store=None, cwd=tmp_path
    ) as server:
        card = http_get(server.card_url).json()
        with pytest.raises(grpc.RpcError) as refused:
            send_text(server.grpc_target, "no token", metadata=(("a2a-version", "1.0"),))
        authorized = (("a2a-version", "1.0"), ("authorization", f"Bearer {TOKEN}"))
        task = send_text(server.grpc_target, "kept", metadata=authorized)
    assert card["name"] == CARD["name"]
    assert card["supportedInterfaces"][0]["url"] == ports.grpc_target
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert store.is_file(), "the file's store, not the default ./.a2a-grpc"
    assert not (tmp_path / ".a2a-grpc").exists()


def test_the_environment_locates_the_file_and_environment_and_flags_override_it(tmp_path: Path) -> None:
    file_ports, env_http, flag_grpc = Ports.free(), Ports.free().http_target, Ports.free().grpc_target
    (tmp_path / "card.json").write_text(json.dumps(CARD))
    config = write_config(
        tmp_path / "a2a.toml",
        f'listen = "{file_ports.grpc_target}"\nhttp_listen = "{file_ports.http_target}"\ncard = "card.json"\n'
        'store = "memory"\n',
    )
    served = Ports(int(flag_grpc.rpartition(":")[2]), int(env_http.rpartition(":")[2]))
    env = {"A2A_GRPC_CONFIG": str(config), "A2A_GRPC_HTTP_LISTEN": env_http}
    with serve_process(
        tmp_path / "logs", "--listen", flag_grpc, ports=served, ports_via="none", store=None, env=env, cwd=tmp_path
    ) as server:
        card = http_get(server.card_url).json()
        with pytest.raises(grpc.RpcError):
            health_status(file_ports.grpc_target)
    assert card["name"] == CARD["name"], "the file still sets the card"
    assert card["supportedInterfaces"][0]["url"] == flag_grpc


@pytest.mark.parametrize(
    ("key", "in_file", "env", "env_value", "flag"),
    [
        ("listen", '"127.0.0.1:7001"', "A2A_GRPC_LISTEN", "127.0.0.1:7002", ["--listen", "127.0.0.1:7003"]),
        ("workers", "3", "A2A_GRPC_WORKERS", "4", ["--workers", "5"]),
        ("max_list_page_bytes", "1000", "A2A_GRPC_MAX_LIST_PAGE_BYTES", "2000", ["--max-list-page-bytes", "3000"]),
        (
            "push_allow",
            '["10.0.0.0/8", "host.internal"]',
            "A2A_GRPC_PUSH_ALLOW",
            "192.168.0.0/16",
            ["--push-allow", "a"],
        ),
        ("push_allow_http", "true", "A2A_GRPC_PUSH_ALLOW_HTTP", "no", ["--push-allow-http"]),
        (
            "card_signing_key",
            '["file.pem"]',
            "A2A_GRPC_CARD_SIGNING_KEY",
            "env.pem",
            ["--card-signing-key", "flag.pem"],
        ),
        ("access_log", "false", "A2A_GRPC_ACCESS_LOG", "1", ["--no-access-log"]),  # a --x/--no-x flag
    ],
)
def test_the_file_is_under_the_environment_which_is_under_the_flags(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    in_file: str,
    env: str,
    env_value: str,
    flag: list[str],
) -> None:
    config = str(write_config(tmp_path / "a2a.toml", f"# a comment\n{key} = {in_file}\n"))
    default, _ = shown(capsys)
    from_file, sources = shown(capsys, "--config", config)
    assert from_file[key] == tomllib.loads(f"v = {in_file}")["v"] != default[key]
    assert sources[key] == f"config file {config}:2"
    monkeypatch.setenv(env, env_value)
    from_env, sources = shown(capsys, "--config", config)
    assert from_env[key] != from_file[key]
    assert sources[key] == f"environment {env}"
    from_flag, sources = shown(capsys, "--config", config, *flag)
    assert from_flag[key] != from_env[key]
    assert sources[key] == f"flag --{key.replace('_', '-')}"


def test_a2a_grpc_config_locates_the_file_and_config_overrides_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    by_env = write_config(tmp_path / "env.toml", 'store = "memory"\n')
    by_flag = write_config(tmp_path / "flag.toml", 'store = "sqlite:///flag.db"\n')
    monkeypatch.setenv("A2A_GRPC_CONFIG", str(by_env))
    assert shown(capsys)[0]["store"] == "memory"
    assert shown(capsys, "--config", str(by_flag))[0]["store"] == "sqlite:///flag.db"
    _, out, _ = run(capsys, "config", "show")
    assert f"# config file: {by_env}" in out.splitlines()


def test_lists_for_repeatable_flags_and_numbers_as_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(
        tmp_path / "a2a.toml",
        """push_allow = [
  "10.0.0.0/8",
  "127.0.0.1,::1",  # comma-joined, as the flag takes it
]
push_signing_key = ["keys/next.pem", "keys/current.pem"]
card_signing_key = ["keys/card.pem", "keys/card-next.pem"]
auth_token = ["t1=alice", "t2=bob,t3=carol"]
grace = 2
push_max_age = 90.5
push_status_only = true
""",
    )
    settings, sources = shown(capsys, "--config", str(config))
    assert settings["push_allow"] == ["10.0.0.0/8", "127.0.0.1,::1"]
    assert settings["push_signing_key"] == ["keys/next.pem", "keys/current.pem"], "paths shown; keys never read"
    assert settings["card_signing_key"] == ["keys/card.pem", "keys/card-next.pem"], "paths shown; keys never read"
    assert settings["auth_token"] == ["***=alice", "***=bob,***=carol"]
    assert (settings["grace"], settings["push_max_age"], settings["push_status_only"]) == (2.0, 90.5, True)
    assert sources["push_allow"] == f"config file {config}:1"
    replaced, _ = shown(capsys, "--config", str(config), "--push-allow", "192.0.2.1", "--push-allow", "192.0.2.2")
    assert replaced["push_allow"] == ["192.0.2.1", "192.0.2.2"], "flags replace the file's list, not add to it"


def test_config_show_redacts_tokens_and_passwords_and_shows_the_effective_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(
        tmp_path / "a2a.toml",
        f'store = "postgresql://app:{PASSWORD}@db.internal:5432/a2a?sslmode=require"\n'
        f'auth_token = ["{TOKEN}=alice"]\nworkers = 2\npush_signing_key = ["signing.pem"]\n',
    )
    (tmp_path / "signing.pem").write_text("-----BEGIN PRIVATE KEY-----\nNOT-TO-BE-SHOWN\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("A2A_GRPC_AUTH_TOKENS", f"{TOKEN}-env=bob")
    code, out, err = run(capsys, "config", "show", "--config", str(config), "--listen", "0.0.0.0:9000")
    assert code == 0, err
    assert TOKEN not in out and PASSWORD not in out and "NOT-TO-BE-SHOWN" not in out
    settings = tomllib.loads(out)
    assert settings["store"] == "postgresql://app:***@db.internal:5432/a2a?sslmode=require"
    assert settings["auth_token"] == ["***=bob"], "the environment's token, over the file's"
    assert (settings["listen"], settings["workers"], settings["http_listen"]) == ("0.0.0.0:9000", 2, "127.0.0.1:8080")
    assert settings["push_signing_key"] == ["signing.pem"]
    assert "# card: not set (default)" in out.splitlines()


def test_what_config_show_prints_is_a_config_file_config_check_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "a2a.toml", 'listen = "127.0.0.1:7001"\npush_allow = ["10.0.0.0/8"]\n')
    code, out, err = run(capsys, "config", "show", "--config", str(config), "--unary-echo", "headers")
    assert code == 0, err
    shown_file = write_config(tmp_path / "shown.toml", out)
    assert run(capsys, "config", "check", str(shown_file)) == (0, "ok\n", "")
    again, _ = shown(capsys, "--config", str(shown_file))
    assert again == tomllib.loads(out)


BAD_LINES = [
    ("lisen", 'lisen = "127.0.0.1:1"', "unknown key 'lisen' (did you mean 'listen'?)"),
    ("workers", 'workers = "2"', "workers: expected a number, got a string"),
    ("push_allow", 'push_allow = "10.0.0.0/8"', "push_allow: expected a list (the flag --push-allow is repeatable)"),
    ("push_allow_http", 'push_allow_http = "yes"', "push_allow_http: expected true or false, got a string"),
    ("listen", "listen = 50051", "listen: expected a string, got an integer"),
    ("max_list_page_bytes", "max_list_page_bytes = 0", "max_list_page_bytes: must be a positive number of bytes"),
    (
        "lease_seconds",
        "lease_seconds = -1",
        "lease_seconds: expected a number of seconds above 0 (below 86400), got '-1'",
    ),
    ("unary_echo", 'unary_echo = "header"', "unary_echo: expected one of 'trailers', 'headers', got 'header'"),
    ("log_format", 'log_format = "xml"', "log_format: expected one of 'text', 'json', got 'xml'"),
    ("access_log", 'access_log = "off"', "access_log: expected true or false, got a string"),
    ("auth_token", f'auth_token = ["{TOKEN}"]', "auth_token: item 1: takes TOKEN=PRINCIPAL"),
    ("serve", "[serve]\nlisten = '127.0.0.1:1'", "unknown table [serve]"),
]


@pytest.mark.parametrize(("key", "line", "problem"), BAD_LINES, ids=[case[1].split("\n")[-1] for case in BAD_LINES])
def test_config_check_names_the_key_and_line_of_a_bad_key_type_or_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, line: str, problem: str
) -> None:
    config = write_config(tmp_path / "a2a.toml", f'# settings\nstore = "memory"\n\n{line}\n')
    code, out, err = run(capsys, "config", "check", str(config))
    assert (code, out) == (2, "")
    [told] = err.splitlines()
    assert told.startswith(f"a2a-grpc: {config}:4: {problem}"), told
    assert key in told
    assert TOKEN not in told, "a token is never echoed"


def test_config_check_says_ok_for_a_good_file_and_lists_every_problem_of_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_config(tmp_path / "good.toml", 'listen = "127.0.0.1:7001"\nworkers = 1\npush_allow = []\n')
    assert run(capsys, "config", "check", str(good)) == (0, "ok\n", "")
    bad = write_config(tmp_path / "bad.toml", "workers = 0\n'grace' = 'soon'\nnope = 1\n")
    code, out, err = run(capsys, "config", "check", str(bad))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"a2a-grpc: {bad}:1: workers: must be a positive whole number, got '0'",
        f"a2a-grpc: {bad}:2: grace: expected a number of seconds from 0 (below 86400), got 'soon'",
        f"a2a-grpc: {bad}:3: unknown key 'nope' (the keys are serve's flags with - as _, e.g. http_listen)",
    ]


def test_config_check_reports_a_file_that_is_not_toml_or_not_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = write_config(tmp_path / "broken.toml", 'listen = "127.0.0.1:1"\nstore =\n')
    code, _, err = run(capsys, "config", "check", str(broken))
    assert code == 2 and err.startswith(f"a2a-grpc: {broken}:2: not valid TOML: "), err
    code, _, err = run(capsys, "config", "check", str(tmp_path / "missing.toml"))
    assert (
        code == 2
        and err == f"a2a-grpc: cannot read the config file {tmp_path / 'missing.toml'}: No such file or directory\n"
    )
    code, _, err = run(capsys, "config", "check")
    assert code == 2 and "name the FILE" in err
    monkeypatch.setenv("A2A_GRPC_CONFIG", str(broken))
    assert run(capsys, "config", "check")[0] == 2, "the FILE defaults to $A2A_GRPC_CONFIG"


def test_config_check_loads_the_card_files_and_imports_the_agent_as_serve_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths are the working directory's, as serve's are
    Path("card.json").write_text(json.dumps(CARD))
    app = tmp_path / "app"
    app.mkdir()
    (app / "config_check_agent.py").write_text(CHECKED_AGENT)
    good = 'card = "card.json"\nextended_card = "card.json"\nagent = "config_check_agent:Agent"\napp_dir = "app"\n'
    assert run(capsys, "config", "check", str(write_config(tmp_path / "good.toml", good))) == (0, "ok\n", "")
    assert str(app) not in sys.path, "the check leaves sys.path as it found it"


CHECKED_AGENT = """
class Agent:
    async def execute(self, context, events):
        await events.complete()

    async def cancel(self, context, events):
        await events.canceled()
"""


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ('card = "missing.json"', "2: card: cannot read agent card missing.json: No such file or directory"),
        ('card = "not-a-card.json"', "2: card: not-a-card.json is not a valid lf.a2a.v1.AgentCard: "),
        ('extended_card = "missing.json"', "2: extended_card: cannot read agent card missing.json: "),
        ('agent = "no_such_module_here:Agent"', "2: agent: cannot load agent no_such_module_here:Agent: "),
        ('agent = "config_check_broken:Agent"', "2: agent: cannot load agent config_check_broken:Agent: "),
        ('agent = "config_check_agent:Nope"', "2: agent: cannot load agent config_check_agent:Nope: AttributeError"),
        ('agent = "config_check_agent:Agent"\napp_dir = "nowhere"', "3: app_dir: nowhere is not a directory"),
    ],
    ids=["card-missing", "card-invalid", "extended-card-missing", "no-module", "raises", "no-attr", "no-app-dir"],
)
def test_config_check_refuses_a_card_that_does_not_load_or_an_agent_that_does_not_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lines: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("not-a-card.json").write_text('{"name": "x", "skills": 3}')
    Path("config_check_broken.py").write_text("raise RuntimeError('the agent module is broken')\n")
    Path("config_check_agent.py").write_text(CHECKED_AGENT)
    config = write_config(tmp_path / "a2a.toml", f'store = "memory"\n{lines}\n')
    code, out, err = run(capsys, "config", "check", str(config))
    assert (code, out) == (2, "")
    [told] = err.splitlines()
    assert told.startswith(f"a2a-grpc: {config}:{problem}"), told


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('lisen = "127.0.0.1:1"', "unknown key 'lisen'"),
        ("workers = 2.5", "workers: must be a positive whole number, got '2.5'"),
        ("push_allow_http = 1", "push_allow_http: expected true or false, got an integer"),
    ],
    ids=["bad-key", "bad-value", "bad-type"],
)
def test_serve_with_a_bad_file_exits_2_with_one_line_naming_the_key_and_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    config = write_config(tmp_path / "a2a.toml", f'store = "memory"\n{line}\ngrace = "soon"\n')
    done = run_serve(["--config", str(config), "--listen", "127.0.0.1:0"], cwd=tmp_path)
    assert done.returncode == 2
    [told] = done.stderr.splitlines()
    assert told.startswith(f"a2a-grpc: {config}:2: {problem}"), told
    assert told.endswith("(and 1 more: `a2a-grpc config check` lists them all)"), told


def test_key_lines_are_found_for_quoted_dotted_and_table_keys() -> None:
    text = '# x\n"listen" = "a"\n  store  = "b"\nagent.x = 1\n[card]\n'
    assert [key_line(text, key) for key in ("listen", "store", "agent", "card", "grace")] == [2, 3, 4, 5, None]


def test_the_docs_example_config_file_passes_config_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    section = "\n".join(section_lines("Config file"))  # docs/configuration.md
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)  # with the card and the agent the example names
    settings = tomllib.loads(example)
    Path(settings["card"]).write_text(json.dumps(CARD))
    module, _, attr = settings["agent"].partition(":")
    source = tmp_path / Path(*module.split("."))
    source.parent.mkdir(parents=True, exist_ok=True)
    source.with_suffix(".py").write_text(CHECKED_AGENT.replace("class Agent:", f"class {attr}:"))
    config = write_config(tmp_path / "a2a.toml", example)
    assert run(capsys, "config", "check", str(config)) == (0, "ok\n", "")
    assert "defaults < config file < environment < flags" in section


def test_workers_run_with_the_settings_of_the_config_file(tmp_path: Path, postgres_url: str) -> None:
    """`--workers` runs the same command line again: each worker reads the file the parent did."""
    ports = Ports.free()
    (tmp_path / "card.json").write_text(json.dumps(CARD))
    config = write_config(
        tmp_path / "a2a.toml",
        f'listen = "{ports.grpc_target}"\nhttp_listen = "{ports.http_target}"\nstore = "{postgres_url}"\n'
        'card = "card.json"\nworkers = 2\ngrace = 1\n',
    )
    server = launch(tmp_path / "logs", ["--config", str(config)], ports=ports, cwd=tmp_path)
    try:
        lines = serving_lines(lambda: server.stderr)
        assert set(lines) == {(ports.grpc_target, ports.http_target)}, server.stderr
        names = {http_get(server.card_url).json()["name"] for _ in range(10)}
        task = send_text(server.grpc_target, "hello")
        assert get_task(server.grpc_target, task.id).status.state == a2a_pb2.TASK_STATE_COMPLETED
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    finally:
        server.kill()
        for pid in (int(pid) for pid in re.findall(r"\(pid (\d+)\) serving", server.stderr)):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert names == {CARD["name"]}
    assert server.stderr.count("worker ") >= 2


def serving_lines(stderr: Callable[[], str]) -> list[tuple[str, str]]:
    """Both workers' `serving A2A on ...` lines, once they have logged them (within START_SECONDS)."""
    deadline = time.monotonic() + START_SECONDS
    while len(found := SERVING_LINE.findall(stderr())) < 2:
        assert time.monotonic() < deadline, f"two workers not serving within {START_SECONDS}s:\n{stderr()}"
        time.sleep(0.05)
    return [(grpc_target, http_target) for grpc_target, http_target in found]
