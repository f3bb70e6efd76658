"""The agent card as the HTTP port serves it: one document, made once per card change, with its validators.

The document is the card's 1.0 ProtoJSON (with 0.3's fields merged in under --v03-card: a2a_grpc.v0_3),
signatures included; its ETag and Last-Modified are those of that document, so a cache holds the signed card.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime

from aiohttp import web

from a2a_grpc.card.model import card_json
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.v0_3.card import merged_document

CACHE_CONTROL = "public, max-age=300"


@dataclass(frozen=True)
class CardDocument:
    body: bytes
    etag: str
    last_modified: datetime  # whole seconds, as HTTP dates are
    headers: Mapping[str, str]  # of every answer, 200 or 304

    @classmethod
    def of(cls, card: a2a_pb2.AgentCard, *, with_v03: bool) -> CardDocument:
        body = json.dumps(merged_document(card), indent=2).encode() if with_v03 else card_json(card)
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        last_modified = datetime.now(UTC).replace(microsecond=0)
        headers = {
            "ETag": etag,
            "Last-Modified": format_datetime(last_modified, usegmt=True),
            "Cache-Control": CACHE_CONTROL,
        }
        return cls(body, etag, last_modified, headers)

    def respond(self, request: web.Request) -> web.Response:
        if self._not_modified(request):
            return web.Response(status=304, headers=self.headers)
        return web.Response(body=self.body, content_type="application/json", headers=self.headers)

    def _not_modified(self, request: web.Request) -> bool:
        """A conditional GET: If-None-Match when present, else If-Modified-Since (ignored when not a date)."""
        if_none_match = request.headers.get("If-None-Match")
        if if_none_match is not None:
            return self.etag in if_none_match or if_none_match.strip() == "*"
        since = request.if_modified_since
        return since is not None and self.last_modified <= since
