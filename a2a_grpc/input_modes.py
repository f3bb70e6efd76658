"""The media types a card accepts as input, and the refusal of a message part it does not
(`ContentTypeNotSupportedError`, spec §3.1.1 and §3.3.2).

What is accepted is the card's `default_input_modes` together with every skill's `input_modes`: a
SendMessageRequest names no skill, so a type some skill takes may reach it, and only a type that no skill
takes is refused here (the reading of the reference SDK, a2a-sdk 1.3). A card that declares no input mode
anywhere accepts everything. Only a media type a part states is checked: the spec refuses "a Media Type
provided in the request's message parts", and most clients send text parts without one.

Media types compare by type and subtype, ignoring case (as RFC 9110 has it) and parameters (`text/plain;
charset=utf-8` is `text/plain`); `*/*` accepts every type and `image/*` every image type. A mode that is not a media type
(`text`, as some 0.3 cards declare) accepts only a part that states the same word.

The accepted set is compiled once per card; request validation (a2a_grpc.validation) checks each part as it
walks them: a set lookup for a media type spelled as the card spells it, else a string split and two more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from a2a_grpc.errors import ContentTypeNotSupportedError
from a2a_grpc.generated import a2a_pb2

ANY_TYPE = "*/*"
MAX_SHOWN_MEDIA_TYPE_CHARS = 100  # a refused media type as the error names it
MAX_SHOWN_MODES = 10  # accepted modes the error lists; then how many more


def essence(media_type: str) -> str:
    """`type/subtype` of a media type, lower-cased, without parameters or spaces."""
    return media_type.partition(";")[0].strip().lower()


@dataclass(frozen=True, slots=True)
class AcceptedInputModes:
    """What one card accepts: exact essences, whole types (`image` for `image/*`), or anything."""

    essences: frozenset[str]
    whole_types: frozenset[str]
    accepts_any: bool
    declared: tuple[str, ...]  # as the card spells them, for the refusal
    spelled: frozenset[str]  # the declared modes and their essences: a part that states one needs no parsing

    @classmethod
    def of(cls, card: a2a_pb2.AgentCard) -> AcceptedInputModes:
        modes = [*card.default_input_modes, *(mode for skill in card.skills for mode in skill.input_modes)]
        declared = tuple(dict.fromkeys(mode.strip() for mode in modes if mode.strip()))
        essences = frozenset(essence(mode) for mode in declared)
        whole_types = frozenset(mode[:-2] for mode in essences if mode.endswith("/*") and mode != ANY_TYPE)
        accepts_any = not essences or ANY_TYPE in essences
        return cls(essences, whole_types, accepts_any, declared, essences | frozenset(declared))

    def accepts(self, media_type: str) -> bool:
        if self.accepts_any or media_type in self.spelled:
            return True
        wanted = essence(media_type)
        if wanted in self.essences:
            return True
        kind, slash, _ = wanted.partition("/")
        return bool(slash) and kind in self.whole_types

    def refusal(self, part: a2a_pb2.Part, index: int) -> ContentTypeNotSupportedError | None:
        """The refusal of `message.parts[index]`, when it states a media type this card does not accept."""
        media_type = part.media_type
        if not media_type or self.accepts(media_type):
            return None
        shown = _clipped(media_type, MAX_SHOWN_MEDIA_TYPE_CHARS)
        accepted = _listed(self.declared, MAX_SHOWN_MODES)
        field = f"message.parts[{index}].media_type"
        return ContentTypeNotSupportedError(
            f"{field} {shown} is not an input mode of this agent; it accepts {accepted}",
            metadata={"mediaType": shown, "acceptedModes": accepted},
            violations=[(field, f"must be one of the card's input modes: {accepted}")],
        )


def enforced_input_modes(card: a2a_pb2.AgentCard, enforce: bool) -> AcceptedInputModes | None:
    """What request validation checks parts against: nothing when not enforced or the card accepts anything."""
    accepted = AcceptedInputModes.of(card) if enforce else None
    return None if accepted is None or accepted.accepts_any else accepted


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _listed(modes: Iterable[str], limit: int) -> str:
    listed = list(modes)
    shown = ", ".join(_clipped(mode, MAX_SHOWN_MEDIA_TYPE_CHARS) for mode in listed[:limit])
    return shown if len(listed) <= limit else f"{shown} and {len(listed) - limit} more"
