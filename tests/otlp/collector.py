"""An OTLP/HTTP collector for the tests of sandcrab's telemetry: it
decodes every export with the official OpenTelemetry protobuf definitions
(the opentelemetry-proto package) and keeps, per request, the raw bytes and
the decoded message as JSON.

Usage: collector.py DIR [--hang]
Prints the port it listens on (loopback), then serves until killed. With
--hang it accepts connections and never answers (a collector that is gone
but whose port still takes connections).
"""

import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

out = sys.argv[1]
hang = "--hang" in sys.argv
count = 0
lock = threading.Lock()

KINDS = {
    "/v1/traces": ("traces", ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": ("metrics", ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        if hang:
            time.sleep(3600)
            return
        kind = KINDS.get(self.path)
        if kind is None or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(400)
            self.end_headers()
            return
        name, request_type, response_type = kind
        message = request_type()
        message.ParseFromString(body)
        with lock:
            count += 1
            n = count
        with open(os.path.join(out, f"{n:04}.{name}.bin"), "wb") as f:
            f.write(body)
        decoded = MessageToDict(message, preserving_proto_field_name=True)
        # Ids as the W3C traceparent writes them: lowercase hex.
        for resource in decoded.get("resource_spans", []):
            for scope in resource.get("scope_spans", []):
                for span in scope.get("spans", []):
                    for key in ("trace_id", "span_id", "parent_span_id"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        with open(os.path.join(out, f"{n:04}.{name}.json"), "w") as f:
            json.dump(decoded, f)
        answer = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
