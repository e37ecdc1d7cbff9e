"""``HeadAsGetMiddleware``: every GET route also answers HEAD (RFC 9110 9.3.2).

FastAPI's ``APIRoute`` serves exactly the methods it is declared with, so a GET route answers
HEAD with 405. This ASGI middleware runs a HEAD request as the GET it stands for and sends the
client that response's status line and headers (``Content-Length`` included) with no body.
Once the headers are sent the response is complete for the server, so a streamed body (a log
file read chunk by chunk) is cut short by the disconnect the server then reports, as for a
client that went away; body chunks the app still sends are dropped.

Install with ``app.add_middleware(HeadAsGetMiddleware)``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGetMiddleware"]


class HeadAsGetMiddleware:
    """Answers ``HEAD`` with the headers of the ``GET`` response (see the module docstring).

    Args:
        app: the ASGI app to wrap; it sees ``GET`` where the client sent ``HEAD``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        headers_sent = False

        async def send_without_body(message: Message) -> None:
            nonlocal headers_sent
            if headers_sent:
                return  # the body, or trailers: nothing of it goes to a HEAD client
            if message["type"] != "http.response.start":
                await send(message)
                return
            await send({**message, "trailers": False})
            headers_sent = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        await self.app({**scope, "method": "GET"}, receive, send_without_body)
