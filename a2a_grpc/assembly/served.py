"""What a server serves, and to whom: its agent and the interceptors around it, its cards and the keys that sign them,
its TLS, and what checks its callers' credentials. Loaded from the settings and checked before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from a2a_grpc.agent import AgentExecutor, check_agent, declared_extensions
from a2a_grpc.assembly.agent import load_agent
from a2a_grpc.assembly.cards import serves_v03, serving_cards
from a2a_grpc.assembly.settings import ServerSettings
from a2a_grpc.auth import CardAuthenticator, Verifiers, secure_cards
from a2a_grpc.card.signing import CardSigner, check_signed_as_served
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server.user import checked_interceptor, load_interceptor
from a2a_grpc.tls import ServerFiles, ServerTLS


@dataclass(frozen=True)
class Served:
    """What a server serves, and to whom: loaded from the settings and checked, before anything runs."""

    agent: AgentExecutor
    interceptors: list[grpc.aio.ServerInterceptor]  # the application's, then settings.interceptors'
    registry: ExtensionRegistry
    tls: ServerTLS | None
    card: a2a_pb2.AgentCard
    extended_card: a2a_pb2.AgentCard | None
    serves_v03: bool
    verifiers: Verifiers
    authenticator: CardAuthenticator | None
    card_signer: CardSigner | None


def served_by(
    settings: ServerSettings, agent: AgentExecutor | None, interceptors: Sequence[grpc.aio.ServerInterceptor]
) -> Served:
    """What `settings` make the server serve (around `agent`, None: settings.agent's), checked."""
    agent = check_agent(agent) if agent is not None else load_agent(settings.agent)
    chosen = [
        *(checked_interceptor(given, repr(given)) for given in interceptors),
        *(load_interceptor(spec) for spec in settings.interceptors),
    ]
    registry = ExtensionRegistry(declared_extensions(agent))
    files = ServerFiles.from_settings(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
    tls = ServerTLS(files) if files is not None else None
    card, extended_card = serving_cards(settings, registry, agent)
    # the cards declare the schemes the settings configure; what the public card requires is enforced
    mtls = tls is not None and tls.client_certificates_required
    verifiers = Verifiers.configure(settings.auth, settings.bearer_tokens, mtls=mtls)
    authenticator = secure_cards(card, extended_card, verifiers)
    check_signed_as_served(settings.card_path, card)
    check_signed_as_served(settings.extended_card_path, extended_card)
    card_signer = CardSigner.from_pem_files(settings.card_signing_keys) if settings.card_signing_keys else None
    with_v03 = serves_v03(settings, card)
    return Served(agent, chosen, registry, tls, card, extended_card, with_v03, verifiers, authenticator, card_signer)
