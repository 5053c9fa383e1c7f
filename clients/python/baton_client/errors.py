"""BatonError: every refusal of the API, and every request that got no answer.

Rules:

- ``code`` is the GraphQL error's ``extensions.code`` (``UNAUTHENTICATED``,
  ``FORBIDDEN``, ``BAD_USER_INPUT``, ``GRAPHQL_PARSE_FAILED``,
  ``EVENTS_PRUNED``, ``SEQ_AHEAD``, ``CONFLICT_RETRY``, ...: docs/access.md).
  ``extensions`` keeps every other extension of the first error (``outcome``,
  ``resumeAfterSeq``, ``limit``, ...); ``errors`` keeps every error as sent.
- A request that got no GraphQL answer (no connection, a connection lost
  mid-request, an answer that is not GraphQL) is ``code == "UNAVAILABLE"``,
  as the API answers when its database is away, with ``extensions["outcome"]``
  ``"NOT_APPLIED"`` (nothing reached the server: send it again as it is) or
  ``"UNKNOWN"`` (it may have been applied). ``may_have_applied`` says which,
  for every code, as the TypeScript SDK's ``mayHaveTakenEffect`` does.
- A problem of the domain (``NoIssueAvailable``, ``NotLockOwner``, ...) is not
  an error: it is the answer's ``__typename``.
- The token never goes into a message.
"""

from typing import Any, Dict, List, Optional

__all__ = ["BatonError", "error_from"]


class BatonError(Exception):
    """A request the API refused, or one that got no answer (``UNAVAILABLE``)."""

    def __init__(
        self,
        code: str,
        message: str,
        extensions: Optional[Dict[str, Any]] = None,
        errors: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.extensions: Dict[str, Any] = dict(extensions or {})
        self.extensions.setdefault("code", code)
        self.errors: List[Dict[str, Any]] = list(errors or [])

    @property
    def may_have_applied(self) -> bool:
        """True when the request may have taken effect although it failed.

        ``UNAVAILABLE`` unless its outcome is ``NOT_APPLIED``, and
        ``INTERNAL_SERVER_ERROR``; any other refusal changed nothing.
        """
        if self.code == "UNAVAILABLE":
            return self.extensions.get("outcome") != "NOT_APPLIED"
        return self.code == "INTERNAL_SERVER_ERROR"

    def __reduce__(self):  # picklable, for multiprocessing callers
        return (BatonError, (self.code, self.message, self.extensions, self.errors))


def error_from(errors: List[Dict[str, Any]]) -> BatonError:
    """The BatonError for a GraphQL answer's ``errors`` (its first error decides the code)."""
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    extensions = first.get("extensions") if isinstance(first.get("extensions"), dict) else {}
    code = str(extensions.get("code") or "GRAPHQL_ERROR")
    return BatonError(code, str(first.get("message") or "the API refused the request"), extensions, errors)
