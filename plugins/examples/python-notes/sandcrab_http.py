"""A blocking HTTP GET over wasi:http, for plugins built with componentize-py.

The host decides where a request may go (the origin must be asked for in
the manifest and granted by the operator) and adds the operator's
credential for that origin itself: the plugin never holds it. A request the
host refuses raises `Refused` with the host's reason, which names the grant
that is missing.
"""
from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as http


class Refused(Exception):
    """The host refused the request."""


class Failed(Exception):
    """The network or the server failed."""


def _error(code):
    if isinstance(code, http.ErrorCode_InternalError) and (code.value or "").startswith("sandcrab: "):
        return Refused(code.value[len("sandcrab: "):])
    return Failed(repr(code))


def _split(url):
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise Failed(f"{url} is not an http(s) URL")
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0], default=len(rest))
    authority, path = rest[:cut], rest[cut:] or "/"
    return (http.Scheme_Https() if scheme.lower() == "https" else http.Scheme_Http()), authority, path


def get(url, headers=()):
    """GET `url`; (status, body bytes)."""
    scheme, authority, path = _split(url)
    request = http.OutgoingRequest(http.Fields.from_list([(k, v.encode()) for k, v in headers]))
    request.set_method(http.Method_Get())
    request.set_scheme(scheme)
    request.set_authority(authority)
    request.set_path_with_query(path)
    body = request.body()
    try:
        pending = outgoing_handler.handle(request, None)
    except Err as e:
        raise _error(e.value)
    http.OutgoingBody.finish(body, None)
    with pending.subscribe() as ready:
        ready.block()
    answer = pending.get()
    pending.__exit__(None, None, None)
    if answer is None or isinstance(answer, Err) or isinstance(answer.value, Err):
        code = answer.value.value if answer is not None and not isinstance(answer, Err) else None
        raise _error(code)
    response = answer.value.value
    status = response.status()
    incoming = response.consume()
    data = bytearray()
    with incoming.stream() as stream:
        while True:
            try:
                data += stream.blocking_read(65536)
            except Err as e:
                if isinstance(e.value, streams.StreamError_Closed):
                    break
                raise Failed(f"reading the response: {e.value!r}")
    http.IncomingBody.finish(incoming).__exit__(None, None, None)
    response.__exit__(None, None, None)
    return status, bytes(data)
