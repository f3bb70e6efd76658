"""Modules that moved into the card and client packages still import under their old names, as the same module."""

import importlib

import pytest

from a2a_grpc._moved import MOVED_MODULES


@pytest.mark.parametrize(("old_name", "new_name"), sorted(MOVED_MODULES.items()))
def test_an_old_module_name_is_the_moved_module(old_name: str, new_name: str) -> None:
    assert importlib.import_module(old_name) is importlib.import_module(new_name)


def test_names_read_from_an_old_module_are_the_packages_names() -> None:
    from a2a_grpc.card import AgentCardError

    assert importlib.import_module("a2a_grpc.card_errors").AgentCardError is AgentCardError
    assert importlib.import_module("a2a_grpc.card_verification").CardVerifier.__module__ == "a2a_grpc.card.verification"
    assert importlib.import_module("a2a_grpc.client_streams").EventStream.__module__ == "a2a_grpc.client.streams"


def test_a_name_that_never_was_a_module_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("a2a_grpc.card_nothing")
