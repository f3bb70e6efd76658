"""What a card's signature covers: RFC 8785's own test vectors pass through the canonicalization we sign with, and
a card's canonical form is its 1.0 ProtoJSON without signatures or empty values (the a2a-sdk 1.0 form beside it)."""

from __future__ import annotations

import json
import struct

import pytest
import rfc8785
from google.protobuf import json_format

from a2a_grpc.card.canonical import (
    CANONICAL_FORMS,
    CanonicalizationError,
    card_payload,
    rfc8785_bytes,
    sdk_1_0_bytes,
)
from a2a_grpc.generated import a2a_pb2

# RFC 8785 §3.2.2: the sample input and its canonical form
RFC_SAMPLE = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
RFC_SAMPLE_CANONICAL = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)
# RFC 8785 §3.2.2: the same output as the bytes the RFC prints
RFC_SAMPLE_HEX = (
    "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73"
    " 22 3a 5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c"
    " 31 65 2d 32 37 5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c 5c 5c"
    " 5c 5c 22 2f 22 7d"
)
# RFC 8785 §3.2.3: property sorting by UTF-16 code units
RFC_SORTING = {
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\U0001f600": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis",
}
RFC_SORTED_VALUES = [
    "Carriage Return",
    "One",
    "Control",
    "Latin Small Letter O With Diaeresis",
    "Euro Sign",
    "Emoji: Grinning Face",
    "Hebrew Letter Dalet With Dagesh",
]
# RFC 8785 Appendix B: IEEE 754 doubles and their canonical text
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def test_the_rfc_sample_canonicalizes_to_the_bytes_the_rfc_prints() -> None:
    canonical = rfc8785.dumps(json.loads(RFC_SAMPLE))
    assert canonical == RFC_SAMPLE_CANONICAL.encode()
    assert canonical == bytes.fromhex(RFC_SAMPLE_HEX)


def test_properties_sort_by_utf16_code_units() -> None:
    canonical = rfc8785.dumps(RFC_SORTING).decode()
    assert list(json.loads(canonical).values()) == RFC_SORTED_VALUES
    assert canonical.startswith('{"\\r":"Carriage Return","1":"One","\u0080":"Control"')


@pytest.mark.parametrize(("bits", "text"), RFC_NUMBERS, ids=[bits for bits, _ in RFC_NUMBERS])
def test_numbers_serialize_as_appendix_b_says(bits: str, text: str) -> None:
    assert rfc8785.dumps(struct.unpack(">d", bytes.fromhex(bits))[0]) == text.encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000"], ids=["NaN", "Infinity"])
def test_numbers_json_cannot_carry_are_refused(bits: str) -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        rfc8785.dumps(struct.unpack(">d", bytes.fromhex(bits))[0])


def card(**fields: object) -> a2a_pb2.AgentCard:
    document = {
        "name": "Zoë's agent",
        "description": "",
        "version": "1.0.0",
        "capabilities": {"streaming": False, "extensions": [{"uri": "urn:x", "params": {"depth": 5, "ratio": 0.5}}]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": [],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
        "signatures": [{"protected": "e30", "signature": "AA"}],
        **fields,
    }
    return json_format.ParseDict(document, a2a_pb2.AgentCard())


@pytest.mark.parametrize("number", [float("nan"), float("inf")], ids=["NaN", "Infinity"])
@pytest.mark.parametrize("form", sorted(CANONICAL_FORMS))
def test_a_card_holding_a_number_json_cannot_carry_has_no_canonical_form(number: float, form: str) -> None:
    holding = card()
    holding.capabilities.extensions[0].params["ratio"] = number
    with pytest.raises(CanonicalizationError):
        CANONICAL_FORMS[form](holding)


def test_a_cards_payload_drops_signatures_and_empty_values_and_keeps_false() -> None:
    payload = card_payload(card())
    assert "signatures" not in payload and "description" not in payload and "defaultOutputModes" not in payload
    assert payload["capabilities"]["streaming"] is False


def test_the_rfc8785_form_keeps_text_as_utf8_and_integral_numbers_bare() -> None:
    canonical = rfc8785_bytes(card())
    assert '"name":"Zoë\'s agent"'.encode() in canonical
    assert b'"params":{"depth":5,"ratio":0.5}' in canonical
    assert canonical == rfc8785.dumps(json.loads(canonical)), "already canonical"


def test_the_sdk_1_0_form_differs_only_in_escapes_and_numbers() -> None:
    legacy = sdk_1_0_bytes(card())
    assert b'"name":"Zo\\u00eb\'s agent"' in legacy and b'"depth":5.0' in legacy
    assert json.loads(legacy) == json.loads(rfc8785_bytes(card()))
    ascii_card = card(name="plain", capabilities={"streaming": True})
    assert sdk_1_0_bytes(ascii_card) == rfc8785_bytes(ascii_card), "an ASCII card without floats: the same bytes"
