#!/usr/bin/env python3
"""A scripted OpenAI-compatible provider on loopback, for whole-process benchmarks.

It answers `POST /v1/chat/completions` (streamed or not) without a model:
while the conversation holds fewer than ROUNDS tool results it asks for one
more `read_file` of `a.txt`, then it answers with text. The answer depends
only on the request, so any number of clients may run at once.

It keeps, in `--stats FILE`, the requests it answered and the seconds it spent
answering them, so a benchmark can take the provider's own time out.

Usage: scripted_provider.py --port-file FILE --stats FILE [--rounds N]
                            [--last-request FILE]
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS_LOCK = threading.Lock()


def chunk(delta, finish=None):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def answer_events(tool_results, rounds):
    """The streamed answer to a conversation holding `tool_results` results."""
    if tool_results < rounds:
        call = {
            "index": 0,
            "id": f"call_{tool_results}",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"file_path":"a.txt"}'},
        }
        return [chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, "tool_calls")]
    return [chunk({"role": "assistant", "content": "Done."}), chunk({}, "stop")]


def whole_answer(events):
    """The same answer as one non-streamed completion."""
    message = {"role": "assistant", "content": None}
    finish = None
    for event in events:
        choice = event["choices"][0]
        delta = choice["delta"]
        if "content" in delta:
            message["content"] = delta["content"]
        if "tool_calls" in delta:
            message["tool_calls"] = [
                {k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]
            ]
        finish = choice["finish_reason"] or finish
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle's algorithm
    # holds the body for the client's delayed ACK (40 ms a request).
    disable_nagle_algorithm = True
    rounds = 0
    stats_path = None
    stats = {"requests": 0, "seconds": 0.0}
    last_request = None

    def log_message(self, *_):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply(404, '{"error":"not found"}')

    def do_POST(self):
        started = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.loads(raw)
        if self.last_request:
            with open(self.last_request, "wb") as f:
                f.write(raw)
        if not self.path.endswith("/chat/completions"):
            self.reply(404, '{"error":"not found"}')
            return
        results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        events = answer_events(results, self.rounds)
        if body.get("stream"):
            usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "bench",
                     "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events + [usage])
            self.reply(200, text + "data: [DONE]\n\n", "text/event-stream")
        else:
            self.reply(200, json.dumps(whole_answer(events)))
        with STATS_LOCK:
            Handler.stats["requests"] += 1
            Handler.stats["seconds"] += time.perf_counter() - started
            with open(self.stats_path, "w") as f:
                json.dump(Handler.stats, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--stats", required=True)
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--last-request", help="write each request body here")
    args = parser.parse_args()
    Handler.rounds = args.rounds
    Handler.stats_path = args.stats
    Handler.last_request = args.last_request
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
