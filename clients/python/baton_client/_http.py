"""One GraphQL request over HTTP(S), with the standard library only.

Rules:

- POST ``{"query", "variables"}`` as JSON with ``Authorization: Bearer
  <token>``; one connection per request, so any thread may send one.
- The answer's ``errors`` raise BatonError (errors.py); otherwise its ``data``
  is returned.
- ``CONFLICT_RETRY`` (the API changed nothing) is sent again, up to 5 tries
  in all, each after a random wait of up to 50 ms x 2^(tries so far - 1):
  50, 100, 200, then 400 ms, as the TypeScript SDK's request.ts. Nothing else
  is retried here.
- No answer raises BatonError ``UNAVAILABLE``: outcome ``NOT_APPLIED`` when no
  connection could be made (nothing was sent), ``UNKNOWN`` when the connection
  failed after the request went out, or the answer is not GraphQL.
- Bounded: ``timeout`` seconds for the connection and each read, and an answer
  of at most MAX_RESPONSE_BYTES.
"""

import http.client
import json
import random
import ssl
import time
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlsplit

from .errors import BatonError, error_from

__all__ = ["Endpoint", "connect", "request", "CONFLICT_TRIES", "CONFLICT_WAIT_SECONDS"]

CONFLICT_TRIES = 5
CONFLICT_WAIT_SECONDS = 0.05
#: The API's longest answer is 6,000,000 characters (maxResponseChars); JSON escapes may double that.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024


class Endpoint:
    """Where requests go and the bearer token they carry (None: anonymous). ``repr`` never shows the token."""

    def __init__(self, url: str, token: Optional[str], timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.token = token
        self.timeout = timeout
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def headers(self, accept: str) -> Dict[str, str]:
        headers = {"content-type": "application/json", "accept": accept}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        return headers

    def __repr__(self) -> str:
        return f"Endpoint({self.url!r})"


def connect(endpoint: Endpoint, timeout: float) -> http.client.HTTPConnection:
    """An open connection to the endpoint, or BatonError UNAVAILABLE/NOT_APPLIED (nothing was sent)."""
    if endpoint.https:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            endpoint.host, endpoint.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
    try:
        conn.connect()
    except (OSError, http.client.HTTPException) as err:
        conn.close()
        raise BatonError("UNAVAILABLE", f"cannot reach {endpoint.url}: {err}", {"outcome": "NOT_APPLIED"}) from None
    return conn


def body_of(query: str, variables: Optional[Dict[str, Any]]) -> bytes:
    return json.dumps({"query": query, "variables": variables or {}}).encode("utf-8")


def request(endpoint: Endpoint, query: str, variables: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The answer's ``data``; BatonError on errors; CONFLICT_RETRY retried with jittered backoff."""
    tries = 1
    while True:
        try:
            return _request_once(endpoint, query, variables)
        except BatonError as err:
            if err.code != "CONFLICT_RETRY" or tries >= CONFLICT_TRIES:
                raise
        time.sleep(random.random() * CONFLICT_WAIT_SECONDS * 2 ** (tries - 1))
        tries += 1


def _request_once(endpoint: Endpoint, query: str, variables: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    status, raw = _post(endpoint, body_of(query, variables))
    try:
        answer = json.loads(raw.decode("utf-8"))
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not ("data" in answer or "errors" in answer):
        raise BatonError(
            "UNAVAILABLE",
            f"{endpoint.url} answered HTTP {status} without a GraphQL response; the request may have been applied",
            {"outcome": "UNKNOWN", "httpStatus": status},
        )
    errors = answer.get("errors")
    if errors:
        raise error_from(errors if isinstance(errors, list) else [errors])
    data = answer.get("data")
    return data if isinstance(data, dict) else {}


def _post(endpoint: Endpoint, body: bytes) -> Tuple[int, bytes]:
    conn = connect(endpoint, endpoint.timeout)
    try:
        conn.request("POST", endpoint.path, body=body, headers=endpoint.headers("application/json"))
        response = conn.getresponse()
        raw = response.read(MAX_RESPONSE_BYTES + 1)
        if len(raw) > MAX_RESPONSE_BYTES:
            raise BatonError(
                "UNAVAILABLE",
                f"{endpoint.url} answered more than {MAX_RESPONSE_BYTES} bytes; the request may have been applied",
                {"outcome": "UNKNOWN"},
            )
        return response.status, raw
    except (OSError, http.client.HTTPException) as err:
        raise BatonError(
            "UNAVAILABLE",
            f"no answer from {endpoint.url} ({err or type(err).__name__}); the request may have been applied",
            {"outcome": "UNKNOWN"},
        ) from None
    finally:
        conn.close()
