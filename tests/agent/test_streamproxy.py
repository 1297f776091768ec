"""The agent's SPDY upgrade to a CRI runtime's streaming server (agent/server/streamproxy.py): what each kind
of refusal becomes. A small TCP server on loopback plays the streaming server's answers; the path through
the real containerd is tests/cri/test_cri_streams.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agent.server.streamproxy import REMOTECOMMAND, Upstream, UpstreamError, dial, upgrade

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _against(answer: Answer, url_path: str = "/exec/token") -> str:
    """The upgrade against a server that answers so; the line its refusal gives (or "101")."""
    asked: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readuntil(b"\r\n\r\n"))
        await answer(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await upgrade(f"http://127.0.0.1:{port}{url_path}", REMOTECOMMAND)
        writer.close()
        result = "101"
    except UpstreamError as exc:
        result = str(exc).replace(str(port), "PORT")
    finally:
        server.close()
        await server.wait_closed()
    head = asked[0].decode()
    assert head.startswith(f"POST {url_path} HTTP/1.1\r\n") and "Upgrade: SPDY/3.1\r\n" in head, head
    assert f"X-Stream-Protocol-Version: {REMOTECOMMAND}\r\n" in head, head
    return result


def _reply(text: bytes) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(text)
        await writer.drain()

    return answer


def test_the_upgrade_and_each_refusal_of_the_streaming_server() -> None:
    switched = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    assert asyncio.run(
        _against(_reply(switched + b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"))
    ) == ("101")
    # An expired or unknown token: the server's status and body, in one line.
    gone = b"HTTP/1.1 404 Not Found\r\nContent-Length: 28\r\n\r\nunknown or expired\ntoken xyz\n"
    assert asyncio.run(_against(_reply(gone))) == (
        "streaming server 127.0.0.1:PORT answered 404: unknown or expired token xyz"
    )
    # Upgraded to another protocol than asked.
    other = switched + b"X-Stream-Protocol-Version: channel.k8s.io\r\n\r\n"
    assert asyncio.run(_against(_reply(other))) == (
        "streaming server 127.0.0.1:PORT does not speak v4.channel.k8s.io"
    )
    # Hung up without an answer; an answer that is not HTTP.
    assert asyncio.run(_against(_reply(b""))).startswith("streaming server 127.0.0.1:PORT: no upgrade")
    assert asyncio.run(_against(_reply(b"garbage\r\n\r\n"))).startswith(
        "streaming server 127.0.0.1:PORT: no upgrade"
    )


def test_a_url_that_is_not_served_and_a_refused_call_are_one_line_each() -> None:
    with pytest.raises(UpstreamError, match="only http:// URLs are served"):
        asyncio.run(upgrade("https://127.0.0.1:1/exec/x", REMOTECOMMAND))

    async def closed_port() -> str:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        line = await dial(
            Upstream(f"http://127.0.0.1:{port}/exec/x", "exec in container c of pod p"), REMOTECOMMAND
        )
        assert isinstance(line, str)
        return line.replace(str(port), "PORT")

    line = asyncio.run(closed_port())
    assert line.startswith("cannot exec in container c of pod p: streaming server 127.0.0.1:PORT: "), line
    # The runtime refused the call itself (no URL): its reason, named.
    refused = Upstream("", "exec in container c of pod p", error="container runtime unix:///x.sock: gone")
    assert asyncio.run(dial(refused, REMOTECOMMAND)) == (
        "cannot exec in container c of pod p: container runtime unix:///x.sock: gone"
    )
