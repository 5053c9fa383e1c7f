"""What a real API will not do on demand, on 127.0.0.1.

FakeServer answers from a script: CONFLICT_RETRY, a proxy's error page, an
event stream cut at a chosen place, seqs replayed that a client already has.
RelayProxy passes requests on to the real API and lets a test act at a
chosen moment: between two requests of the worker, before its ledger stream
opens, or instead of an answer that was applied.
"""

import http.client
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List
from urllib.parse import urlsplit


class Reply:
    """What the server does with one request: a body (JSON or bytes), an event stream, or a cut."""

    def __init__(
        self,
        status: int = 200,
        body: Any = None,
        events: List[str] = (),
        hold: bool = False,
        cut: bool = False,
        headers: Dict[str, str] = None,
    ):
        self.status, self.body, self.events, self.hold, self.cut = status, body, list(events), hold, cut
        self.headers = dict(headers or {})


def op_name(body: Dict[str, Any]) -> str:
    """The operation's name in a request body (``LockChanges``, ``NewestSeq``, ``WorkClaim``, ...), or ""."""
    match = re.search(r"\b(?:query|mutation|subscription)\s+(\w+)", body.get("query", ""))
    return match.group(1) if match else ""


def sse(name: str, payload: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(payload) if payload is not None else ''}\n\n"


def change(seq: int) -> str:
    return sse(
        "next", {"data": {"lockChanged": {"seq": str(seq), "kind": "CLAIMED", "issueId": "i", "status": "CLAIMED"}}}
    )


class FakeServer:
    """Calls ``script(n, request_body)`` for the n-th request (from 0); records every request body."""

    def __init__(self, script: Callable[[int, Dict[str, Any]], Reply]) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.released = threading.Event()  # ends held streams
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with lock:
                    n = len(fake.requests)
                    fake.requests.append(body)
                reply = script(n, body)
                if reply.cut:
                    self.close_connection = True
                    return
                if reply.events or reply.hold:
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for event in reply.events:
                        self.wfile.write(event.encode())
                        self.wfile.flush()
                    if reply.hold:
                        fake.released.wait(30)
                    self.close_connection = True
                    return
                raw = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/graphql"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class RelayProxy:
    """Passes every request on to ``target`` (event streams as they come), calling ``before(name)`` when a request
    arrives and ``after(name)`` once the API has answered but before the answer goes back (if it returns True,
    the connection is cut instead: the request was applied, its answer lost). ``name`` is the operation's name
    (``WorkClaim``, ``LockChanges``, ...). ``seen`` lists the names in order of arrival."""

    def __init__(
        self,
        target: str,
        before: Callable[[str], None] = lambda name: None,
        after: Callable[[str], Any] = lambda name: None,
    ):
        upstream = urlsplit(target)
        self.seen: List[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["content-length"]))
                name = op_name(json.loads(raw))
                proxy.seen.append(name)
                before(name)
                conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() in ("authorization", "accept", "content-type")
                }
                conn.request("POST", upstream.path, body=raw, headers=headers)
                answer = conn.getresponse()
                streaming = (answer.getheader("content-type") or "").startswith("text/event-stream")
                body = b"" if streaming else answer.read()
                if after(name):
                    conn.close()
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                self.send_header("content-type", answer.getheader("content-type") or "application/json")
                if streaming:
                    self.send_header("connection", "close")
                    self.end_headers()
                    try:
                        while True:
                            chunk = answer.read1(65536)
                            if not chunk:
                                break
                            self.wfile.write(chunk)
                            self.wfile.flush()
                    except OSError:
                        pass
                    self.close_connection = True
                else:
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                conn.close()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/graphql"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
