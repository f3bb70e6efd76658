"""The cards a server serves: loaded and completed from the settings, given the port actually bound, signed."""

from __future__ import annotations

from typing import Any

from a2a_grpc import resume
from a2a_grpc.agent import AgentExecutor
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.auth.card_security import API_KEY, kind_of
from a2a_grpc.card.from_agent import serving_card
from a2a_grpc.card.http import CardDocument
from a2a_grpc.card.model import GRPC_BINDING, CardError, complete_card, register_card_extensions
from a2a_grpc.card.signing import CardSigner
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.service import PushService
from a2a_grpc.signing_keys import jwks_document
from a2a_grpc.v0_3.card import add_v03_interfaces, is_v03


def serving_cards(
    settings: ServerSettings, registry: ExtensionRegistry, agent: AgentExecutor
) -> tuple[a2a_pb2.AgentCard, a2a_pb2.AgentCard | None]:
    """The public and the extended card, each listing every extension either card or the agent declares,
    and this server's stream-resume extension; a card without a GRPC interface gets this server's."""
    paths = [settings.card_path, *([settings.extended_card_path] if settings.extended_card_path else [])]
    cards = [serving_card(path, agent) for path in paths]
    for card in cards:
        register_card_extensions(card, registry)
    if resume.EXTENSION.uri not in registry:
        registry.add(resume.EXTENSION)
    for path, card in zip(paths, cards, strict=True):
        try:
            complete_card(card, settings.listen, registry)
        except CardError as error:  # name the file: with an extended card there are two
            raise CardError(f"{path or 'the card built from the agent'}: {error}") from None
        if settings.serve_v03:
            add_v03_interfaces(card)
    return cards[0], cards[1] if len(cards) > 1 else None


def card_document(settings: ServerSettings, card: a2a_pb2.AgentCard) -> CardDocument:
    """The document the HTTP port serves for `card`: with the 0.3 fields only when the 0.3 face is served and
    `settings.v03_card` asks for them."""
    return CardDocument.of(card, with_v03=settings.v03_card and serves_v03(settings, card))


def serves_v03(settings: ServerSettings, card: a2a_pb2.AgentCard) -> bool:
    """Whether the A2A 0.3 face is served (and, with --v03-card, the card document carries its fields): not for a
    card whose every interface names a tenant, since 0.3 calls carry none."""
    return settings.serve_v03 and any(is_v03(i) for i in card.supported_interfaces)


def api_key_headers(*cards: a2a_pb2.AgentCard | None) -> list[str]:
    """The request headers the cards' API-key schemes name: credentials, which agents do not see."""
    return [
        scheme.api_key_security_scheme.name
        for card in cards
        if card is not None
        for scheme in card.security_schemes.values()
        if kind_of(scheme) == API_KEY
    ]


def grpc_url(card: a2a_pb2.AgentCard) -> str:
    """The card's GRPC interface's URL (complete_card gives every served card one)."""
    return next(i.url for i in card.supported_interfaces if i.protocol_binding == GRPC_BINDING)


def advertise_bound_port(listen: str, bound: str, *cards: a2a_pb2.AgentCard | None) -> None:
    """With `--listen HOST:0` the cards' gRPC interface gets the address actually bound (`bound`)."""
    if not listen.endswith(":0"):
        return
    for card in cards:
        for interface in card.supported_interfaces if card is not None else ():
            if interface.protocol_binding == GRPC_BINDING and interface.url == listen:
                interface.url = bound


def sign_cards(signer: CardSigner | None, jku: str | None, *cards: a2a_pb2.AgentCard | None) -> None:
    """Sign the cards (once: a card is signed after every change the server makes to it, none comes later)."""
    if signer is None:
        return
    for card in cards:
        if card is not None:
            signer.sign(card, jku)


def published_keys(push: PushService | None, card_signer: CardSigner | None) -> dict[str, Any] | None:
    """The JWKS of every key that signs push notifications or cards (None: no key signs anything)."""
    push_keys = push.signer.keys if push is not None and push.signer is not None else ()
    card_keys = card_signer.keys if card_signer is not None else ()
    return jwks_document((*push_keys, *card_keys)) if push_keys or card_keys else None
