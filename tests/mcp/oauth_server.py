"""A remote MCP server that needs sign-in, with its own OAuth 2.1
authorization server on the same origin, for the sign-in tests.

    oauth_server.py MODE LOG [OTHER_ORIGIN]   prints its port, then serves
    oauth_server.py --browse URL              plays the user's browser

It speaks just enough streamable HTTP (JSON answers) for a client to
initialize, list and call two tools: `whoami` needs the scope `read`,
`write_note` needs `write` too (answered `403 insufficient_scope`
otherwise). Every request is logged to LOG as a JSON line (path, the
Authorization header, the scope an authorization request asked for), so
a test can see which token went where.

MODE is `good`, or one way an authorization server can be hostile or
broken:
  open               no sign-in at all (another server, to see what it gets)
  issuer-elsewhere   its metadata names an issuer on OTHER_ORIGIN
  legacy-elsewhere   no resource metadata (2025-03-26); its root metadata
                     names an issuer on OTHER_ORIGIN
  resource-mismatch  its resource metadata is for another resource
  metadata-redirect  every metadata document redirects to OTHER_ORIGIN
  token-garbage      its token endpoint answers an HTML page
  bad-scheme         its authorization endpoint is a file: URL
"""

import base64
import hashlib
import json
import secrets
import sys
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = "good"
LOG = None
OTHER = "http://127.0.0.1:9"
CODES = {}  # code -> (challenge, scope)
TOKENS = {}  # access or refresh token -> scope
NEEDS = {"whoami": {"read"}, "write_note": {"read", "write"}}


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def origin(self):
        return f"http://127.0.0.1:{self.server.server_port}"

    def answer(self, status, body=b"", kind="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def record(self, body=None):
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        log({
            "method": self.command,
            "path": url.path,
            "authorization": self.headers.get("authorization"),
            "scope": query.get("scope"),
            "rpc": (body or {}).get("method") if isinstance(body, dict) else None,
        })
        return url.path, query

    # -- metadata ---------------------------------------------------------

    def resource_metadata(self):
        if MODE == "legacy-elsewhere":
            return self.answer(404, b"{}")
        if MODE == "metadata-redirect":
            return self.answer(302, headers=[("location", OTHER + self.path)])
        resource = self.origin() + "/mcp"
        if MODE == "resource-mismatch":
            resource = OTHER + "/mcp"
        self.answer(200, {
            "resource": resource,
            "authorization_servers": [self.origin()],
            "scopes_supported": ["read", "write"],
        })

    def server_metadata(self):
        if MODE == "metadata-redirect":
            return self.answer(302, headers=[("location", OTHER + self.path)])
        issuer = self.origin()
        if MODE == "issuer-elsewhere":
            issuer = OTHER
        if MODE == "legacy-elsewhere":
            issuer = OTHER + "/oauth"
        authorize = self.origin() + "/authorize"
        if MODE == "bad-scheme":
            authorize = "file:///etc/passwd"
        self.answer(200, {
            "issuer": issuer,
            "authorization_endpoint": authorize,
            "token_endpoint": self.origin() + "/token",
            "registration_endpoint": self.origin() + "/register",
            "scopes_supported": ["read", "write"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        })

    # -- authorization server ---------------------------------------------

    def authorize(self, query):
        code = secrets.token_urlsafe(16)
        CODES[code] = (query.get("code_challenge"), query.get("scope", ""))
        back = query["redirect_uri"] + "?" + urllib.parse.urlencode(
            {"code": code, "state": query.get("state", "")})
        self.answer(302, headers=[("location", back)])

    def token(self, form):
        if MODE == "token-garbage":
            return self.answer(200, b"<html>Service Unavailable</html>", "text/html")
        if form.get("grant_type") == "refresh_token":
            scope = TOKENS.get(form.get("refresh_token"))
            if scope is None:
                return self.answer(400, {"error": "invalid_grant"})
        else:
            challenge, scope = CODES.pop(form.get("code"), (None, None))
            verifier = form.get("code_verifier", "").encode()
            made = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if challenge is None or made != challenge:
                return self.answer(400, {"error": "invalid_grant"})
        access, refresh = "at-" + secrets.token_hex(16), "rt-" + secrets.token_hex(16)
        TOKENS[access] = scope
        TOKENS[refresh] = scope
        self.answer(200, {"access_token": access, "token_type": "Bearer",
                          "expires_in": 3600, "refresh_token": refresh, "scope": scope})

    # -- the MCP server ---------------------------------------------------

    def challenge(self, status, error=None, scope="read"):
        said = f'Bearer resource_metadata="{self.origin()}/.well-known/oauth-protected-resource/mcp", scope="{scope}"'
        if error:
            said += f', error="{error}"'
        self.answer(status, {"error": error or "invalid_token"},
                    headers=[("www-authenticate", said)])

    def mcp(self, body):
        granted = None
        if MODE != "open":
            header = self.headers.get("authorization") or ""
            granted = TOKENS.get(header.removeprefix("Bearer "))
            if granted is None:
                return self.challenge(401)
            granted = set(granted.split())
        method, rid = body.get("method"), body.get("id")
        if rid is None:
            return self.answer(202)
        if method == "initialize":
            result = {"protocolVersion": body["params"]["protocolVersion"],
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "signed-in", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in NEEDS]}
        elif method == "tools/call":
            name = body["params"]["name"]
            if granted is not None and not NEEDS[name] <= granted:
                return self.challenge(403, "insufficient_scope", " ".join(sorted(NEEDS[name])))
            result = {"content": [{"type": "text", "text": f"{name}: done"}]}
        else:
            return self.answer(200, {"jsonrpc": "2.0", "id": rid,
                                     "error": {"code": -32601, "message": method}})
        self.answer(200, {"jsonrpc": "2.0", "id": rid, "result": result})

    def do_GET(self):
        path, query = self.record()
        if path.startswith("/.well-known/oauth-protected-resource"):
            return self.resource_metadata()
        if path.startswith("/.well-known/oauth-authorization-server") or \
                path.startswith("/.well-known/openid-configuration"):
            return self.server_metadata()
        if path == "/authorize":
            return self.authorize(query)
        self.answer(404 if path != "/mcp" else 405)

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.startswith("/mcp"):
            body = json.loads(raw)
            self.record(body)
            return self.mcp(body)
        path, _ = self.record()
        form = dict(urllib.parse.parse_qsl(raw.decode()))
        if path == "/register":
            asked = json.loads(raw)
            return self.answer(201, dict(asked, client_id="client-" + secrets.token_hex(4),
                                         token_endpoint_auth_method="none"))
        if path == "/token":
            return self.token(form)
        self.answer(404)

    def do_DELETE(self):
        self.record()
        self.answer(200)


def browse(url):
    """Follow the authorization URL and its redirects back to the client."""
    urllib.request.urlopen(url, timeout=30).read()


def main():
    global MODE, LOG, OTHER
    if sys.argv[1] == "--browse":
        return browse(sys.argv[2])
    MODE, LOG = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        OTHER = sys.argv[3]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
