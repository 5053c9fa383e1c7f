"""Baton: the API's URL and a token, and the three things a client does with them.

- ``request(query, variables)``: any operation; its ``data``, or BatonError
  (_http.py: CONFLICT_RETRY retried, no answer is UNAVAILABLE).
- ``work(handler, ...)``: a worker for the agent whose key this is (work.py).
- ``lock_changes(company_id, after_seq)``: the live ledger over SSE,
  resuming after its last seq (changes.py).

The token is sent only as ``Authorization: Bearer ...``; it is never put in a
URL, a message or a ``repr``.
"""

import os
from typing import Any, Dict, Iterator, Optional

from . import work as _work
from ._http import Endpoint, request
from .changes import lock_changes

__all__ = ["Baton", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:4000/graphql"


class Baton:
    """A client of one Baton API with one token (the admin token, a board key or an agent key)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, timeout: float = 30.0) -> None:
        """``url``: the GraphQL URL (default BATON_URL, else DEFAULT_URL); ``token`` (default BATON_TOKEN);
        ``timeout``: seconds for a connection and each read of a request."""
        self._endpoint = Endpoint(
            url or os.environ.get("BATON_URL") or DEFAULT_URL,
            token if token is not None else os.environ.get("BATON_TOKEN"),
            timeout,
        )

    @property
    def url(self) -> str:
        return self._endpoint.url

    def request(self, query: str, variables: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Runs any operation of the schema and returns its ``data``; raises BatonError on errors."""
        return request(self._endpoint, query, variables)

    def work(
        self,
        handler: _work.Handler,
        include_unassigned: bool = False,
        once: bool = False,
        concurrency: int = 1,
        lease_renewal: Optional[float] = None,
    ) -> None:
        """Claims issues and runs ``handler(job)`` for each until stopped (baton_client/work.py says how).

        ``lease_renewal``: seconds between heartbeats (default: a third of the run's lease; never more than half of it).
        Returns after SIGTERM or KeyboardInterrupt (once the running handlers have finished), or with ``once``
        when nothing is left to claim. Raises BatonError if the key cannot work (not an agent's, or revoked).
        """
        _work.work(self._endpoint, handler, include_unassigned, once, concurrency, lease_renewal)

    def lock_changes(
        self,
        company_id: str,
        after_seq: Optional[str] = None,
        *,
        issue_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> Iterator[Dict[str, Any]]:
        """The company's committed lock changes, in seq order, each once, across reconnections (changes.py).

        Without ``after_seq``: those after the newest seq when this is called (read here).
        """
        return lock_changes(self._endpoint, company_id, after_seq, issue_id=issue_id, agent_id=agent_id)

    def __repr__(self) -> str:
        return f"Baton({self._endpoint.url!r})"
