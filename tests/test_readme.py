"""The shell lines of the README and of docs/*.md, run as a new user runs them, against real servers on free
loopback ports.

A section is found by its heading's title, in whichever of README.md and docs/*.md has it (a title is a
heading in one document only). A section's ```sh blocks run in one bash session from the checkout (so `.venv/bin/grpcurl` and
`.venv/bin/a2a-grpc` are the checkout's), one command at a time. Beyond that, the test does what is
listed here, and nothing else:

- A line ending in a backslash is joined with the next.
- A `scripts/serve ARGS` line (after any NAME=VALUE settings) starts a server that runs until stopped:
  the shell skips it, and the test starts `a2a-grpc serve ARGS` from the checkout itself, with those
  settings, before the section runs (on `--store memory` unless the line names a store: the default
  store would be the checkout's ./.a2a-grpc). When no such line serves 127.0.0.1:50051, the section
  talks to the plain `scripts/serve` the README has running there, which the test starts too.
- Every 127.0.0.1:PORT in the lines becomes a free loopback port of its own.
- The `#   ` lines right under a command show what it prints: its fragments (split at `...`) appear
  in its output in that order, whitespace runs counting as one space. The command exits 0, or fails
  when that begins with `ERROR:`. A placeholder there (capitals ending in `_ID`, e.g. `TASK_ID`) is
  read from the output, and the lines after it get the value in its place.
- A command ending in ` &` runs in the background; the next line waits until it has printed something
  (as a user sees it do before typing on). The session ends with `wait`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer, error_info, send_request
from process import REPO, Ports, ServerProcess, child_env, free_port, serve_process

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc

README = REPO / "README.md"
DOCS = REPO / "docs"
DOCUMENTS = (README, *sorted(DOCS.glob("*.md")))
REQUIRED_EXTENSION_CARD = REPO / "examples" / "required-extension-card.json"
PRIORITY = "https://example.com/ext/priority/v1"
PROMISE = "#   "
SETTING = re.compile(r"[A-Z_][A-Z0-9_]*=")
ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]*_ID\b")
DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_HTTP_LISTEN = "127.0.0.1:8080"
STEP_SECONDS = 60.0


def is_fence(line: str) -> bool:
    return line.strip().startswith("```")


def heading(line: str) -> str | None:
    """The title of a Markdown heading line (outside code blocks), else None."""
    return line.lstrip("#").strip() if re.match(r"#+ ", line) else None


def sections(document: Path) -> Iterator[tuple[str, list[str]]]:
    """Each heading of `document` with its lines, up to the next heading of any level."""
    title: str | None = None
    lines: list[str] = []
    fence = False
    for line in document.read_text().splitlines():
        if is_fence(line):
            fence = not fence
        elif not fence and (name := heading(line)) is not None:
            if title is not None:
                yield title, lines
            title, lines = name, []
            continue
        lines.append(line)
    if title is not None:
        yield title, lines


def section_lines(title: str) -> list[str]:
    """The lines under the heading `title`, in whichever document (README.md, docs/*.md) has it."""
    found = [(document, lines) for document in DOCUMENTS for name, lines in sections(document) if name == title]
    assert len(found) == 1, f"{title!r} is a heading in {len(found)} places: {[str(d) for d, _ in found]}"
    return found[0][1]


def fenced_blocks(title: str, language: str) -> list[list[str]]:
    """The `language` code blocks under the heading `title`, up to the next heading."""
    blocks: list[list[str]] = []
    fence: str | None = None
    for line in section_lines(title):
        if is_fence(line):
            fence = line.strip().removeprefix("```") if fence is None else None
            if fence == language:
                blocks.append([])
        elif fence == language:
            blocks[-1].append(line.rstrip())
    return blocks


def shell_lines(title: str) -> list[str]:
    lines: list[str] = []
    for line in (line for block in fenced_blocks(title, "sh") for line in block):
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1].removesuffix("\\").rstrip() + " " + line
        else:
            lines.append(line)
    return lines


@dataclass
class Step:
    command: str
    promise: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.command.endswith(" &")

    @property
    def fails(self) -> bool:
        return bool(self.promise) and self.promise[0].startswith("ERROR:")


@dataclass
class Server:
    """A `scripts/serve` line: its settings and its arguments."""

    env: dict[str, str]
    args: list[str]

    @classmethod
    def parse(cls, line: str) -> Server | None:
        if "scripts/serve" not in line:
            return None
        words = shlex.split(line, comments=True)
        settings = list(itertools.takewhile(SETTING.match, words))
        rest = words[len(settings) :]
        if not rest or rest[0] != "scripts/serve":
            return None
        return cls(dict(word.split("=", 1) for word in settings), [word for word in rest[1:] if word != "&"])

    def option(self, name: str, default: str) -> str:
        return self.args[self.args.index(name) + 1] if name in self.args else default


def parse(lines: list[str]) -> tuple[list[Step], list[Server]]:
    steps: list[Step] = []
    servers: list[Server] = []
    current: Step | None = None
    for line in lines:
        if line.startswith(PROMISE) and current is not None:
            current.promise.append(line.removeprefix(PROMISE).strip())
        elif not line or line.startswith("#"):
            current = None
        elif (server := Server.parse(line)) is not None:
            servers.append(server)
            current = None
        else:
            current = Step(line)
            steps.append(current)
    return steps, servers


def free_addresses(lines: list[str], given: dict[str, str] | None = None) -> dict[str, str]:
    """Every loopback address in `lines`, and the default ones, each mapped to a free one (or as `given`)."""
    given = given or {}
    wanted = {match[0] for line in lines for match in ADDRESS.finditer(line)} | {DEFAULT_LISTEN, DEFAULT_HTTP_LISTEN}
    wanted -= set(given)
    ports: set[int] = set()
    while len(ports) < len(wanted):
        ports.add(free_port())
    free = {address: f"127.0.0.1:{port}" for address, port in zip(sorted(wanted), sorted(ports), strict=True)}
    return {**free, **given}


def rewrite(text: str, addresses: dict[str, str]) -> str:
    return ADDRESS.sub(lambda match: addresses[match[0]], text)


def port(address: str) -> int:
    return int(address.rpartition(":")[2])


@contextmanager
def serving(servers: list[Server], addresses: dict[str, str], log_dir: Path) -> Iterator[None]:
    if all(server.option("--listen", DEFAULT_LISTEN) != DEFAULT_LISTEN for server in servers):
        servers = [Server({}, []), *servers]  # the plain scripts/serve the README has running
    with ExitStack() as stack:
        for index, server in enumerate(servers):
            listen = addresses[server.option("--listen", DEFAULT_LISTEN)]
            http_listen = addresses[server.option("--http-listen", DEFAULT_HTTP_LISTEN)]
            args = ["--listen", listen, "--http-listen", http_listen, *(rewrite(a, addresses) for a in server.args)]
            stack.enter_context(
                serve_process(
                    log_dir / f"server-{index}",
                    *args,
                    ports=Ports(port(listen), port(http_listen)),
                    ports_via="none",
                    env={name: rewrite(value, addresses) for name, value in server.env.items()},
                    cwd=REPO,
                )
            )
        yield


@dataclass
class Ran:
    """A command run in the session: its stdout, stderr and exit status are files named after `stem`."""

    command: str
    stem: Path

    def file(self, suffix: str) -> Path:
        return self.stem.with_suffix(suffix)

    @property
    def started_printing(self) -> bool:
        out = self.file(".out")
        return self.file(".rc").exists() or (out.exists() and out.stat().st_size > 0)

    @property
    def exit_status(self) -> int:
        return int(self.file(".rc").read_text())

    @property
    def output(self) -> str:
        return self.file(".out").read_text() + "\n" + self.file(".err").read_text()


class Session:
    """One bash session in the checkout, fed one command at a time."""

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True)
        self.log_dir = log_dir
        self.count = 0
        with (log_dir / "bash.log").open("wb") as log:
            self.bash = subprocess.Popen(
                ["bash"],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                cwd=REPO,
                env=child_env(),
                text=True,
                start_new_session=True,
            )

    def run(self, command: str) -> Ran:
        self.count += 1
        ran = Ran(command, self.log_dir / f"step-{self.count}")
        out, err, rc = (shlex.quote(str(ran.file(suffix))) for suffix in (".out", ".err", ".rc"))
        if command.endswith(" &"):
            group = f"{{ {command.removesuffix('&')}\necho $? > {rc}; }} > {out} 2> {err} &"
        else:
            group = f"{{ {command}\n}} > {out} 2> {err}; echo $? > {rc}"
        assert self.bash.stdin is not None
        self.bash.stdin.write(f"{group}\n: > {shlex.quote(str(ran.file('.done')))}\n")
        self.bash.stdin.flush()
        self.wait_until(lambda: ran.file(".done").exists() and (not command.endswith(" &") or ran.started_printing))
        return ran

    def wait_until(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + STEP_SECONDS
        while not condition():
            log = (self.log_dir / "bash.log").read_text()
            assert self.bash.poll() is None, f"bash exited with {self.bash.returncode}:\n{log}"
            assert time.monotonic() < deadline, f"a command did not end within {STEP_SECONDS}s:\n{log}"
            time.sleep(0.01)

    def close(self) -> None:
        os.killpg(self.bash.pid, signal.SIGKILL)  # its own group: the session and what it left running
        self.bash.wait()


@contextmanager
def session(log_dir: Path) -> Iterator[Session]:
    shell = Session(log_dir)
    try:
        yield shell
    finally:
        shell.close()


def promised(step: Step, values: dict[str, str]) -> re.Pattern[str]:
    """The promise's fragments in order; a placeholder without a value yet is captured."""
    fragments = [" ".join(part.split()) for line in step.promise for part in line.split("...") if part.strip()]

    def placeholder(match: re.Match[str]) -> str:
        name = match[0]
        return re.escape(values[name]) if name in values else rf'(?P<{name}>[^"\s]+)'

    return re.compile(".*?".join(PLACEHOLDER.sub(placeholder, re.escape(fragment)) for fragment in fragments))


def check(step: Step, ran: Ran, values: dict[str, str]) -> None:
    """`ran` did what `step` promises; the placeholders it shows get their values."""
    status, output = ran.exit_status, ran.output
    assert (status != 0) == step.fails, f"{ran.command}\nexited with {status}:\n{output}"
    match = promised(step, values).search(" ".join(output.split()))
    assert match is not None, f"{ran.command}\ndoes not print {step.promise}:\n{output}"
    values.update(match.groupdict())


def fill(command: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match[0] in values, f"{match[0]} in {command!r} is not shown by any line before it"
        return values[match[0]]

    return PLACEHOLDER.sub(value, command)


def run_section(title: str, log_dir: Path, addresses_given: dict[str, str] | None = None) -> list[str]:
    """Run the shell lines under `title` as the module docstring says; the commands run, as written.
    `addresses_given` maps loopback addresses of the lines to ones the test has running (a database)."""
    lines = shell_lines(title)
    steps, servers = parse(lines)
    assert steps, f"no shell lines under {title!r}"
    addresses = free_addresses(lines, addresses_given)
    values: dict[str, str] = {}
    in_background: list[tuple[Step, Ran]] = []
    with serving(servers, addresses, log_dir), session(log_dir / "shell") as shell:
        for step in steps:
            ran = shell.run(rewrite(fill(step.command, values), addresses))
            if step.background:
                in_background.append((step, ran))
            else:
                check(step, ran, values)
        shell.run("wait")
        for step, ran in in_background:
            check(step, ran, values)
    return [step.command for step in steps]


def test_the_grpcurl_walk_runs_as_written_and_calls_every_rpc(tmp_path: Path) -> None:
    commands = run_section("A walk through the RPCs with grpcurl", tmp_path)
    called = {match[1] for command in commands for match in re.finditer(r"A2AService/(\w+)", command)}
    assert called == set(a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].methods_by_name)


def test_the_extension_lines_run_as_written(tmp_path: Path) -> None:
    run_section("Extensions", tmp_path)


def test_the_relay_lines_run_as_written(tmp_path: Path) -> None:
    run_section("The two built-in extensions", tmp_path)


def test_the_v03_lines_run_as_written(tmp_path: Path) -> None:
    run_section("A2A 0.3 clients", tmp_path)


def test_the_chaos_lines_run_as_written(tmp_path: Path) -> None:
    run_section("Before a release: a soak", tmp_path)


def test_the_readme_shows_the_example_cards_capabilities() -> None:
    [excerpt] = fenced_blocks("Extensions", "json")
    card = json.loads(REQUIRED_EXTENSION_CARD.read_text())
    assert json.loads("{" + "\n".join(excerpt) + "}") == {"capabilities": card["capabilities"]}


async def test_the_example_card_requires_its_extension(start_server: StartServer) -> None:
    server = await start_server(card=json.loads(REQUIRED_EXTENSION_CARD.read_text()))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(send_request(), metadata=V1)
        accepted = await stub.SendMessage(send_request(), metadata=(*V1, ("a2a-extensions", PRIORITY)))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(refused.value).reason == "EXTENSION_SUPPORT_REQUIRED"
    assert error_info(refused.value).metadata["missingExtensions"] == PRIORITY
    assert accepted.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


def run_python_example(example: list[str], server: ServerProcess, tmp_path: Path) -> list[str]:
    """`example` saved as a file, its addresses those of `server`, run by the checkout's Python: what it prints."""
    source = "\n".join(example).replace(DEFAULT_HTTP_LISTEN, server.ports.http_target)
    script = tmp_path / "example.py"
    script.write_text(source.replace(DEFAULT_LISTEN, server.ports.grpc_target))
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), str(script)],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=STEP_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_client_example_runs_as_written(tmp_path: Path) -> None:
    """The Python example of the Client section, saved as a file and run against the demo server."""
    [example] = fenced_blocks("Client", "python")
    with serve_process(tmp_path / "server") as server:
        printed = run_python_example(example, server, tmp_path)
    assert printed == [
        "TASK_STATE_COMPLETED ()",
        "task",
        "artifact_update",
        "status_update",
        "a2a-grpc demo agent",
    ]


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    run_section("Quick start", tmp_path)


def test_the_quick_start_python_client_prints_what_the_readme_says(tmp_path: Path) -> None:
    [example] = fenced_blocks("Quick start", "python")
    assert len([line for line in example if line.strip()]) <= 10
    with serve_process(tmp_path / "server") as server:
        assert run_python_example(example, server, tmp_path) == ["TASK_STATE_COMPLETED hello"]


def test_the_client_lines_run_as_written(tmp_path: Path) -> None:
    run_section("Client", tmp_path)


def test_the_extensions_client_example_runs_as_written(tmp_path: Path) -> None:
    """The client half of the Extensions section, against the example card that requires the extension."""
    example = fenced_blocks("Extensions", "python")[-1]
    card = str(REQUIRED_EXTENSION_CARD)
    with serve_process(tmp_path / "server", "--card", card) as server:
        assert run_python_example(example, server, tmp_path) == [f"('{PRIORITY}',)"]


async def test_the_replica_lines_run_as_written(tmp_path: Path, postgres_server: str) -> None:
    """The two replicas of the local-database section, on a role and a database made as that section's
    (root-only) lines make them, in the tests' own throwaway cluster standing in for port 5433."""
    import asyncpg  # the postgres extra: installed by scripts/test

    admin = await asyncpg.connect(postgres_server)
    try:
        await admin.execute("DO $$BEGIN CREATE ROLE a2a LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END$$")
        await admin.execute("DROP DATABASE IF EXISTS a2a WITH (FORCE)")
        await admin.execute("CREATE DATABASE a2a OWNER a2a")
        cluster = ADDRESS.search(postgres_server)
        assert cluster is not None, postgres_server
        run_section("Two replicas on it", tmp_path, addresses_given={"127.0.0.1:5433": cluster[0]})
    finally:
        await admin.execute("DROP DATABASE IF EXISTS a2a WITH (FORCE)")
        await admin.close()


# The sections whose ```sh blocks the tests run (here, and tests/test_stubs_doc.py), and those they cannot
# run, with why. A new section with shell lines must join one of the two.
SHELL_SECTIONS_RUN = {
    "Quick start",
    "Generate the stubs",  # tests/test_stubs_doc.py, in a fresh venv
    "Call the server",  # tests/test_stubs_doc.py, installing the package into that venv
    "A walk through the RPCs with grpcurl",
    "Extensions",
    "The two built-in extensions",
    "A2A 0.3 clients",
    "Client",
    "Two replicas on it",
    "Before a release: a soak",
}
SHELL_SECTIONS_NOT_RUN = {
    "The two commands": "scripts/test is the suite itself; scripts/serve is what every section here starts",
    "TLS": "HOST and the certificate files stand for the reader's own (tests/test_tls.py runs these flags)",
    "Signed agent cards": "writes a key into the checkout and serves in the foreground (test_card_verify_cli.py)",
    "Tracing": "installs the otel extra into .venv, which the test install has already",
    "A local database for trying replicas": "needs root and apt-get; the tests run the same binaries themselves",
    "The container image": "needs docker (tests/test_deploy.py checks the Dockerfile)",
}


def test_every_shell_block_is_run_or_says_why_not() -> None:
    with_shell = {
        title
        for document in DOCUMENTS
        for title, lines in sections(document)
        if any(line.strip() == "```sh" for line in lines)
    }
    assert not SHELL_SECTIONS_RUN & set(SHELL_SECTIONS_NOT_RUN)
    assert with_shell == SHELL_SECTIONS_RUN | set(SHELL_SECTIONS_NOT_RUN)


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def test_the_links_between_the_documents_resolve() -> None:
    broken = []
    for document in DOCUMENTS:
        for target in re.findall(r"\]\(([^)\s]+)\)", document.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, fragment = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target}")
            elif fragment and fragment not in {anchor(name) for name, _ in sections(linked)}:
                broken.append(f"{document.name}: {target} (no such heading)")
    assert not broken


def test_the_readme_is_a_front_door() -> None:
    """At most about 400 lines, a table of contents naming each of its sections, and every docs page linked."""
    text = README.read_text()
    assert len(text.splitlines()) <= 400
    contents = "\n".join(section_lines("Contents"))
    level_two = [line.removeprefix("## ") for line in text.splitlines() if line.startswith("## ")]
    assert [name for name in level_two if f"(#{anchor(name)})" not in contents] == ["Contents"]
    assert all(f"(docs/{page.name})" in text for page in DOCS.glob("*.md"))
