"""Malformed input from the network, as the libraries the server runs on log it: never an ERROR traceback.

Anyone can send bytes to the server's ports; one log line per bad request at most, and not at ERROR,
keeps such traffic from flooding the logs or paging anyone.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

GRPC_LOGGER = "grpc._cython.cygrpc"
_INVALID_ENCODING = "Invalid encoding on %s"
_CLIENT_GONE = "ExecuteBatchError raised in core by servicer method"


def quiet_grpc_client_logs() -> None:
    """Drop two ERROR grpc logs with a traceback that tell of clients, not of the server: one each time it
    decodes a request header value that is not UTF-8 (several times a call; it decodes the value as Latin-1
    then, and the call is answered as usual), and one each time a client went away before grpc could send
    it a stream's next event or a status (grpc ends the call; nothing is lost but what the client left)."""
    logging.getLogger(GRPC_LOGGER).addFilter(_not_about_clients)


def _not_about_clients(record: logging.LogRecord) -> bool:
    return record.msg != _INVALID_ENCODING and not str(record.msg).startswith(_CLIENT_GONE)


class HttpServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log, where a request that does not parse as HTTP is one INFO line, not an ERROR traceback."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            reason = str(exc_info.message).partition("\n")[0].rstrip(":")
            self.info(f"{msg}: %s %s", *args, exc_info.code, reason)
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)
