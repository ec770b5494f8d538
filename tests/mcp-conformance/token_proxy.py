"""A loopback proxy that adds `sandcrab mcp serve`'s bearer token to every
request and changes nothing else (Host and Origin pass as sent), so the
MCP conformance suite, which cannot send a token, tests the server as a
client with the token would meet it.

Usage: token_proxy.py UPSTREAM_PORT TOKEN   (prints the port it listens on)
"""

import asyncio
import sys

UPSTREAM, TOKEN = int(sys.argv[1]), sys.argv[2]


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(client_r, client_w):
    try:
        head = await client_r.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        client_w.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    kept = [
        line
        for line in lines[1:]
        if line and not line.lower().startswith(("connection:", "authorization:"))
    ]
    # One request per connection: what follows the head is its body.
    head = "\r\n".join(
        [lines[0], *kept, f"Authorization: Bearer {TOKEN}", "Connection: close", "", ""]
    ).encode("latin-1")
    up_r, up_w = await asyncio.open_connection("127.0.0.1", UPSTREAM)
    up_w.write(head)
    await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
