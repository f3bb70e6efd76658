"""API keys (the card's `apiKeySecurityScheme`): a key in the request header the scheme names.

The keys come from a file (`--api-keys FILE`) or an environment variable (`--api-keys env:NAME`), one
`KEY=PRINCIPAL` a line (blank lines and `#` comments are skipped), or its hashed form
`sha256:HEX=PRINCIPAL`, HEX the SHA-256 of the key in hex, which keeps the keys themselves out of the file:

    python -m a2a_grpc.auth.api_keys          # reads a key on stdin, prints its sha256:HEX form

Only digests are kept in memory. A presented key is looked up by its own SHA-256: what is compared is a
digest of what the caller sent, so the time the comparison takes says nothing about any stored key (the
constant-time guarantee, without a scan of every key on every call). Keys should be long random strings
(128 bits or more): a digest without salt protects a random key, not a password.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Iterable, Mapping

from a2a_grpc.auth.principal import CredentialRejected, PeerAuthContext, Principal
from a2a_grpc.errors import Metadata

HASHED = re.compile(r"sha256:([0-9a-fA-F]{64})")
ENV_PREFIX = "env:"


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class HashedSecrets:
    """Secrets (API keys, static bearer tokens) by the SHA-256 of each, each naming its principal."""

    __slots__ = ("_principals",)

    def __init__(self, principals_by_digest: Mapping[bytes, str]) -> None:
        self._principals = dict(principals_by_digest)

    @classmethod
    def of_plain(cls, principals_by_secret: Mapping[str, str]) -> HashedSecrets:
        return cls({digest(secret): principal for secret, principal in principals_by_secret.items()})

    def __len__(self) -> int:
        return len(self._principals)

    def principals(self, scheme: str) -> dict[str, Principal]:
        """A Principal for each principal name, made once rather than per call."""
        return {name: Principal(name, scheme) for name in self._principals.values()}

    def principal(self, presented: str) -> str | None:
        """The principal of the secret `presented`, None when it is not one (timing: see the module)."""
        return self._principals.get(digest(presented))


def load_api_keys(source: str) -> HashedSecrets:
    """The keys `source` names: a file, or `env:NAME` for the environment variable NAME (the same lines, or
    comma-joined). ValueError naming the line, never its content."""
    if source.startswith(ENV_PREFIX):
        name = source.removeprefix(ENV_PREFIX)
        text = os.environ.get(name)
        if text is None:
            raise ValueError(f"--api-keys {source}: the environment variable {name} is not set")
        lines = [item for line in text.splitlines() for item in line.split(",")]
        where = f"--api-keys {source}"
    else:
        try:
            with open(source, encoding="utf-8") as file:
                lines = file.read().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise ValueError(f"cannot read --api-keys {source}: {reason}") from None
        where = source
    return parse_api_keys(lines, where)


def parse_api_keys(lines: Iterable[str], where: str) -> HashedSecrets:
    principals: dict[bytes, str] = {}
    for number, line in enumerate(lines, 1):
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        key, sep, principal = item.rpartition("=")  # a key may end in base64 padding: the principal has no "="
        key, principal = key.strip(), principal.strip()
        if not sep or not key or not principal:
            raise ValueError(f"{where}: line {number} is not KEY=PRINCIPAL (its content is not shown)")
        hashed = HASHED.fullmatch(key)
        key_digest = bytes.fromhex(hashed[1]) if hashed else digest(key)
        if principals.setdefault(key_digest, principal) != principal:
            raise ValueError(f"{where}: line {number} gives a key already listed another principal")
    if not principals:
        raise ValueError(f"{where} lists no API key")
    return HashedSecrets(principals)


class ApiKeyScheme:
    """The key in the request header `header` (lower-case, as gRPC delivers it)."""

    carries_scopes = False

    def __init__(self, name: str, header: str, keys: HashedSecrets) -> None:
        self.name = name
        self.header = header.lower()
        self.kind = f"{self.header}: <API key>"
        self._keys = keys
        self._principals = keys.principals(name)

    def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal | None:
        header = self.header
        for key, value in metadata:
            if key == header:
                presented = str(value).strip()
                principal = self._keys.principal(presented) if presented else None
                if principal is None:
                    raise CredentialRejected("unknown API key")
                return self._principals[principal]
        return None


def main() -> int:
    """Print the hashed form of the key read on stdin (or a prompt that does not echo it)."""
    if sys.stdin.isatty():
        import getpass

        key = getpass.getpass("API key (not shown): ")
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        print("no key given", file=sys.stderr)
        return 2
    print(f"sha256:{digest(key).hex()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
