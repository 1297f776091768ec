"""Requests refused before they reach the application (aiohttp's HTTP parser) answered as kube `Status` JSON.

aiohttp answers a request line or header over its limits, too many headers or a malformed request with a
plain-text page from `RequestHandler.handle_error`, outside the middleware chain. `StatusRunner` makes the
server's connection handlers `StatusRequestHandler`s, whose `handle_error` answers a Status instead: 414
for a request line over `MAX_LINE`, 431 for a header over `MAX_FIELD` or more than `MAX_HEADERS` headers,
400 for anything else malformed, 500 for the rest. The offending bytes are neither echoed nor logged
(they may hold a token). kube-apiserver (Go's net/http) answers 431 in plain text for more than 1 MiB of
request line and headers together; there a Status is what every other error gets, so clients parse one.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from apiserver.status import api_error

log = logging.getLogger(__name__)

MAX_LINE = 16384  # request line (method, URL, version); distinct from MAX_FIELD to tell the two apart
MAX_FIELD = 8190  # one header line (aiohttp's default)
MAX_HEADERS = 128  # aiohttp's default
HANDLER_ARGS: dict[str, Any] = {
    "max_line_size": MAX_LINE,
    "max_field_size": MAX_FIELD,
    "max_headers": MAX_HEADERS,
}


def refusal(status: int, exc: BaseException | None) -> tuple[int, str, str]:
    """(code, reason, message) of the Status answering a request aiohttp could not parse."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else None
        if limit == MAX_LINE:
            return (
                414,
                "RequestURITooLong",
                f"Request-URI Too Long: the request line is over {MAX_LINE} bytes",
            )
        return (
            431,
            "RequestHeaderFieldsTooLarge",
            f"Request Header Fields Too Large: a header is over {limit} bytes",
        )
    if isinstance(exc, BadHttpMessage) and "Too many headers" in exc.message:
        return (
            431,
            "RequestHeaderFieldsTooLarge",
            f"Request Header Fields Too Large: over {MAX_HEADERS} headers",
        )
    if isinstance(exc, BadHttpMessage) or status == 400:
        kind = type(exc).__name__ if exc is not None else "BadRequest"
        return 400, "BadRequest", f"the request could not be parsed as HTTP/1.1 ({kind})"
    return status, "InternalError", "Internal error occurred: the request could not be served"


class StatusRequestHandler(RequestHandler):
    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # a reply is under way: aiohttp closes the connection
            return super().handle_error(request, status, exc, message)
        code, reason, text = refusal(status, exc)
        log.debug("refused a request from %s: %s (%s)", request.remote, text, type(exc).__name__)
        response = web.Response(body=orjson.dumps(api_error(code, reason, text)), status=code,
                                content_type="application/json")  # fmt: skip
        response.force_close()
        return response


class _StatusServer(web.Server):
    def __call__(self) -> RequestHandler:
        return StatusRequestHandler(self, loop=self._loop, **self._kwargs)


class StatusRunner(web.AppRunner):
    """An AppRunner whose connections answer unparseable requests with a Status (and HANDLER_ARGS' limits)."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, **{**HANDLER_ARGS, **kwargs})

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _StatusServer  # aiohttp builds the Server; only its handler class differs
        return server
