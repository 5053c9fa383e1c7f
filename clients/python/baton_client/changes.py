"""``Baton.lock_changes()``: a company's committed lock changes, live, over SSE.

The ``lockChanged`` subscription is POSTed to the GraphQL URL with ``accept:
text/event-stream`` (graphql-yoga's "distinct connections" mode: one HTTP
response per subscription, ``event: next`` / ``data: {...}`` per result,
``event: complete`` at its end). Rules:

- Changes come in ``seq`` order, each once: every change is a dict with the
  LockEvent fields (``seq`` a decimal string, ``companyId``, ``issueId``,
  ``kind``, ``status``, ``runId``, ``agentId``, ``checkoutRunId``,
  ``executionRunId``, ``reason``, ``at``).
- With ``after_seq`` the ledger after that seq is replayed first (``"0"``:
  all of it); without it, changes start from now: the company's newest seq
  is read first (``lockEvents(newestFirst: true, first: 1)``, when
  ``lock_changes()`` is called) and the stream starts after it, so a
  connection cut before the first change still resumes from there. If that
  read gets no answer, it is tried again when the stream is iterated (as a
  reconnection is); a refusal of it is raised there.
- A cut connection, a stream that ends, silence longer than READ_TIMEOUT
  (the server sends keep-alives), an answer that is not an event stream, or
  an error ``UNAVAILABLE``, ``CONFLICT_RETRY``, ``INTERNAL_SERVER_ERROR`` or
  ``SUBSCRIPTION_OVERFLOW``: it subscribes again with ``afterSeq`` = the last
  seq it yielded, after RECONNECT_DELAYS (0.1 s growing to 5 s, reset by the
  next change), and drops any seq at or below the last one yielded. So no
  change is missed and none comes twice, from the start on (a saved seq, or
  ``"0"``, misses nothing before the call either).
- Any other error is raised as BatonError and not retried: ``EVENTS_PRUNED``
  (retention dropped events after that seq: ``extensions["resumeAfterSeq"]``
  says where every kept event follows), ``SEQ_AHEAD`` (the database never made
  that seq), ``UNAUTHENTICATED`` (a bad or revoked key), ``FORBIDDEN``, a
  query the API rejects. A stream that breaks the format (an event over 1 MB,
  data that is not JSON) raises BatonError ``BAD_RESPONSE``.
- A refusal that says when to come back (an HTTP ``Retry-After``) carries it
  as ``extensions["retryAfterSeconds"]``.
- It ends when the caller stops iterating (``break``, or ``close()``), which
  closes the connection.
"""

import http.client
import json
import socket
import threading
from typing import Any, Callable, Dict, Iterator, Optional

from . import _documents as ops
from ._http import Endpoint, body_of, connect, request
from ._sse import StreamTooLong, events
from .errors import BatonError, error_from

__all__ = ["lock_changes", "Control", "RECONNECT_DELAYS", "RETRIED_CODES"]

LOCK_CHANGES = """
subscription LockChanges($companyId: ID!, $issueId: ID, $agentId: ID, $afterSeq: ID) {
  lockChanged(companyId: $companyId, issueId: $issueId, agentId: $agentId, afterSeq: $afterSeq) {
    seq companyId issueId kind status runId agentId checkoutRunId executionRunId reason at
  }
}
"""

#: Seconds between reconnection attempts; the last repeats (as the TypeScript SDK's lockChanges.ts).
RECONNECT_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
#: Errors after which resubscribing after the last seq is safe: the ledger keeps every event.
RETRIED_CODES = frozenset({"UNAVAILABLE", "CONFLICT_RETRY", "INTERNAL_SERVER_ERROR", "SUBSCRIPTION_OVERFLOW"})
CONNECT_TIMEOUT = 10.0
#: Silence (not even a keep-alive) this long counts as a cut connection.
READ_TIMEOUT = 60.0
#: The most of a refusal's body read when the answer is not an event stream.
MAX_REFUSAL_BYTES = 1024 * 1024


class _Reconnect(Exception):
    """This connection is over; subscribe again after the last seq."""


class Control:
    """Lets another thread end a ``lock_changes()`` iteration: ``close()`` shuts its socket (the worker's ledger watch).

    It holds the socket itself: once a response says ``connection: close``, http.client hands the socket to the
    response and forgets it on the connection. ``live`` is set while an event stream is open (not while it
    reconnects), and ``on_open`` is called each time one opens.
    """

    def __init__(self, on_open: Optional[Callable[[], None]] = None) -> None:
        self.stopped = threading.Event()
        self.live = threading.Event()
        self.on_open = on_open
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None

    def _opened(self) -> None:
        self.live.set()
        if self.on_open is not None:
            self.on_open()

    def attach(self, sock: Optional[socket.socket]) -> None:
        with self._lock:
            self._sock = sock
        if sock is not None and self.stopped.is_set():
            self._shut(sock)

    def close(self) -> None:
        self.stopped.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # a read blocked on it returns at once
        except OSError:
            pass


def lock_changes(
    endpoint: Endpoint,
    company_id: str,
    after_seq: Optional[str] = None,
    issue_id: Optional[str] = None,
    agent_id: Optional[str] = None,
    control: Optional[Control] = None,
) -> Iterator[Dict[str, Any]]:
    """The generator behind ``Baton.lock_changes()``: what it yields, retries and raises is this module's docstring.

    Without ``after_seq``, "now" is the newest seq at this call (read here, before the generator starts).
    """
    control = control or Control()
    refused: Optional[BatonError] = None
    if after_seq is None:
        try:
            after_seq = _newest_seq(endpoint, company_id)
        except BatonError as err:
            if err.code not in RETRIED_CODES:
                refused = err  # raised when iterated, as every refusal of the stream is
            # otherwise read again when iterated, with the reconnection delays
    return _changes(endpoint, company_id, after_seq, issue_id, agent_id, control, refused)


def _newest_seq(endpoint: Endpoint, company_id: str) -> str:
    """The company's newest final seq ("0" for an empty ledger): the stream starts after it."""
    newest = request(endpoint, ops.NEWEST_SEQ, {"companyId": company_id})["lockEvents"]
    return newest[0]["seq"] if newest else "0"


def _changes(
    endpoint: Endpoint,
    company_id: str,
    after_seq: Optional[str],
    issue_id: Optional[str],
    agent_id: Optional[str],
    control: Control,
    refused: Optional[BatonError] = None,
) -> Iterator[Dict[str, Any]]:
    if refused is not None:
        raise refused
    attempt = 0
    while after_seq is None and not control.stopped.is_set():
        try:
            after_seq = _newest_seq(endpoint, company_id)
        except BatonError as err:
            if err.code not in RETRIED_CODES:
                raise
            if control.stopped.wait(RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)]):
                return
            attempt += 1
    if after_seq is None:
        return  # closed before it could start
    last = int(after_seq)
    attempt = 0
    while not control.stopped.is_set():
        variables = {
            "companyId": company_id,
            "issueId": issue_id,
            "agentId": agent_id,
            "afterSeq": str(last),
        }
        results = _results(endpoint, variables, control)
        try:
            for result in results:
                errors = result.get("errors")
                if errors:
                    error = error_from(errors if isinstance(errors, list) else [errors])
                    if error.code in RETRIED_CODES:
                        break
                    raise error
                change = (result.get("data") or {}).get("lockChanged")
                if not isinstance(change, dict):
                    continue
                attempt = 0
                seq = int(change["seq"])
                if seq <= last:
                    continue  # already yielded: a replay after a reconnect
                last = seq
                yield change
        except _Reconnect:
            pass
        finally:
            results.close()  # the connection, at once
        if control.stopped.wait(RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)]):
            return
        attempt += 1


def _results(endpoint: Endpoint, variables: Dict[str, Any], control: Control) -> Iterator[Dict[str, Any]]:
    """Each GraphQL result of one subscription connection; _Reconnect when the connection fails or ends."""
    try:
        conn = connect(endpoint, CONNECT_TIMEOUT)
    except BatonError:
        raise _Reconnect() from None
    control.attach(conn.sock)
    try:
        try:
            conn.sock.settimeout(READ_TIMEOUT)
            conn.request(
                "POST",
                endpoint.path,
                body=body_of(LOCK_CHANGES, variables),
                headers=endpoint.headers("text/event-stream"),
            )
            response = conn.getresponse()
        except (OSError, http.client.HTTPException):
            raise _Reconnect() from None
        if response.status != 200 or not (response.getheader("content-type") or "").startswith("text/event-stream"):
            yield _refusal(response)
            raise _Reconnect()
        control._opened()
        try:
            for name, data in events(response):
                if name == "complete":
                    break
                if name != "next":
                    continue
                try:
                    result = json.loads(data)
                except ValueError:
                    raise BatonError("BAD_RESPONSE", f"{endpoint.url} sent an event that is not JSON") from None
                if isinstance(result, dict):
                    yield result
        except StreamTooLong as err:
            raise BatonError("BAD_RESPONSE", f"{endpoint.url} sent {err}") from None
        except (OSError, http.client.HTTPException):
            pass  # cut: subscribe again
        raise _Reconnect()
    finally:
        control.live.clear()
        control.attach(None)
        conn.close()


def _refusal(response: http.client.HTTPResponse) -> Dict[str, Any]:
    """What an answer that is not an event stream says: its GraphQL errors, or UNAVAILABLE (a proxy's page, say)."""
    try:
        raw = response.read(MAX_REFUSAL_BYTES)
        answer = json.loads(raw.decode("utf-8"))
    except (OSError, http.client.HTTPException, ValueError):
        answer = None
    if isinstance(answer, dict) and answer.get("errors"):
        _with_retry_after(answer["errors"], response.getheader("retry-after"))
        return answer
    return {
        "errors": [
            {"message": f"HTTP {response.status} without an event stream", "extensions": {"code": "UNAVAILABLE"}}
        ]
    }


def _with_retry_after(errors: Any, header: Optional[str]) -> None:
    """Puts an HTTP ``Retry-After`` (whole seconds) into the first error's extensions as ``retryAfterSeconds``."""
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else None
    if first is None or header is None or not header.strip().isdigit():
        return
    extensions = first.get("extensions")
    if not isinstance(extensions, dict):
        extensions = first["extensions"] = {}
    extensions.setdefault("retryAfterSeconds", int(header.strip()))
