"""SSRF guard for push notification webhooks.

A webhook URL comes from a client, so the server must not be made to POST to its own network:
loopback, private, link-local (cloud metadata at 169.254.169.254), CGNAT, multicast, unspecified
and reserved addresses are refused, including IPv6 forms that embed such an IPv4 address
(IPv4-mapped, IPv4-compatible, NAT64 and 6to4). Hosts and CIDRs on the allow-list
(`--push-allow HOST_OR_CIDR`) are permitted.

The checks run twice: `AddressPolicy.check_url` / `check_destination` when a config is set, and
`GuardedResolver` when a connection is made, so an address that a host name resolves to later (DNS
rebinding) is checked before it is dialled. aiohttp never asks the resolver about a literal-IP URL:
the dialler must call `check_url` right before each request, as `PushSender` does.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Iterator, Sequence

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from a2a_grpc.validation import URL_TEXT, URL_TEXT_RULE

MAX_URL_LENGTH = 2048
PASSED_URLS = 1024  # URLs whose passing verdict is remembered

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_FORBIDDEN_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # CGNAT
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_FORBIDDEN_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "2001::/23",  # IETF protocol assignments, Teredo
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# What a URL parser may read as IPv4 although it is no canonical dotted quad: 2130706433, 127.1, 0x7f.0.0.1.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)


class PushTargetRefused(Exception):
    """A webhook destination that the policy refuses; `reason` is safe to return to the caller."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class AddressPolicy:
    """Which webhook URLs and addresses may be dialled."""

    def __init__(self, allow: Sequence[str] = (), allow_http: bool = False) -> None:
        self.allow_http = allow_http
        # The verdict on a URL needs no DNS, so it is the same every time: those that pass are remembered.
        self._passed = functools.lru_cache(maxsize=PASSED_URLS)(self._judge_url)
        self._allowed_hosts: set[str] = set()
        self._allowed_networks: list[IPNetwork] = []
        for entry in allow:
            try:
                self._allowed_networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                self._allowed_hosts.add(_normal_host(entry))

    def host_allowed(self, host: str) -> bool:
        """Whether `host` is allow-listed by name."""
        return _normal_host(host) in self._allowed_hosts

    def address_allowed(self, address: str) -> bool:
        """Whether a connection to the IP address `address` is permitted."""
        try:
            forms = list(_forms(ipaddress.ip_address(address)))
        except ValueError:
            return False
        if any(form in network for form in forms for network in self._allowed_networks):
            return True
        return not any(_forbidden(form) for form in forms)

    def check_url(self, url: str) -> URL:
        """Refuse what can be judged without DNS: the URL's form, and a literal IP or local host name.
        Returns the URL parsed."""
        return self._passed(url)

    def _judge_url(self, url: str) -> URL:
        parsed = _parse(url, self.allow_http)
        host = parsed.raw_host or ""
        if self.host_allowed(host):
            return parsed
        if _is_ip(host):
            if not self.address_allowed(host):
                raise PushTargetRefused("url", "host is not an allowed destination")
            return parsed
        if _looks_numeric(host):
            raise PushTargetRefused("url", "host is not a canonical IP address or DNS name")
        if _normal_host(host) == "localhost" or _normal_host(host).endswith(".localhost"):  # RFC 6761
            raise PushTargetRefused("url", "host is not an allowed destination")
        return parsed

    async def check_destination(self, url: str, resolver: AbstractResolver) -> None:
        """`check_url`, then refuse a host name if any address it resolves to is forbidden."""
        parsed = self.check_url(url)
        host = parsed.raw_host or ""
        if _is_ip(host) or self.host_allowed(host):
            return
        try:
            results = await resolver.resolve(host, parsed.port or 0, family=socket.AF_UNSPEC)
        except OSError:
            raise PushTargetRefused("url", "host could not be resolved") from None
        if not results:
            raise PushTargetRefused("url", "host could not be resolved")
        if not all(self.address_allowed(result["host"]) for result in results):
            raise PushTargetRefused("url", "host resolves to an address that is not allowed")


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that only hands out addresses the policy permits.

    Forbidden addresses are dropped; when none is left, `PushTargetRefused` is raised, so the
    connector never dials an unchecked address. Closing it closes `inner`.
    """

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver) -> None:
        self._policy = policy
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if self._policy.host_allowed(host):
            return results
        permitted = [result for result in results if self._policy.address_allowed(result["host"])]
        if not permitted:
            raise PushTargetRefused("url", "host resolves to an address that is not allowed")
        return permitted

    async def close(self) -> None:
        await self._inner.close()


def _parse(url: str, allow_http: bool) -> URL:
    if len(url) > MAX_URL_LENGTH:
        raise PushTargetRefused("url", f"longer than {MAX_URL_LENGTH} characters")
    if not URL_TEXT.fullmatch(url):  # as the request check refuses: so a config an older server stored is not sent
        raise PushTargetRefused("url", URL_TEXT_RULE)
    try:
        parsed = URL(url)
    except ValueError:
        raise PushTargetRefused("url", "not a valid URL") from None
    schemes = ("https", "http") if allow_http else ("https",)
    if parsed.scheme not in schemes:
        raise PushTargetRefused("url", f"scheme must be {' or '.join(schemes)}")
    if not parsed.raw_host:
        raise PushTargetRefused("url", "has no host")
    if "@" in parsed.raw_authority:
        raise PushTargetRefused("url", "must not carry user info")
    return parsed


def _normal_host(host: str) -> str:
    host = host.strip().rstrip(".").lower()
    try:
        return URL.build(scheme="https", host=host).raw_host or host
    except ValueError:
        return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _looks_numeric(host: str) -> bool:
    last_label = host.rstrip(".").rsplit(".", 1)[-1]
    return bool(_NUMERIC_LABEL.match(last_label))


def _forms(address: IPAddress) -> Iterator[IPAddress]:
    """The address, and the IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4)."""
    yield address
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            yield embedded


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _forbidden(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in network for network in _FORBIDDEN_V4)
    if _embedded_ipv4(address) is not None:
        return False  # judged by the IPv4 address it carries
    return address not in _GLOBAL_UNICAST_V6 or any(address in network for network in _FORBIDDEN_V6)
