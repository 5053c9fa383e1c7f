"""What a handler's end means for its issue's release (``Baton.work()``).

Rules (as the TypeScript SDK's outcomes.ts):

- The handler returns: ``DONE``. What it returned is the issue's ``result``
  when it is JSON (``json.dumps`` takes it, no NaN) of at most 64 KB; ``None``
  means no result; anything else is left out (logged) and the issue is
  released all the same.
- ``raise Requeue(reason)``: ``REQUEUE``, OPEN again at once, the attempt
  counted. ``Requeue(reason, retry_after_seconds=N)``: not claimable for N
  seconds (a whole number from 0 to 86400) and the attempt is given back:
  "not now" is not a failure. A bad N raises ValueError where the Requeue is
  built, so the issue ends FAILED with that message.
- ``raise Blocked(reason)``: ``BLOCKED``.
- Any other exception: ``FAILED``, the reason its text (its class name when
  the text is empty). Every reason is cut to 1000 characters, the API's limit.
"""

import json
from typing import Any, Optional, Tuple

__all__ = ["Requeue", "Blocked", "Release", "release_of", "result_of", "MAX_JSON_BYTES", "MAX_RETRY_AFTER_SECONDS"]

MAX_RETRY_AFTER_SECONDS = 86_400
MAX_JSON_BYTES = 65_536
MAX_REASON_CHARS = 1000


class Requeue(Exception):
    """Raise it from a handler to put the issue back in the queue, at once or after ``retry_after_seconds``."""

    def __init__(self, reason: str = "", retry_after_seconds: Optional[int] = None, *, result: Any = None) -> None:
        if retry_after_seconds is not None and (
            isinstance(retry_after_seconds, bool)
            or not isinstance(retry_after_seconds, int)
            or not 0 <= retry_after_seconds <= MAX_RETRY_AFTER_SECONDS
        ):
            raise ValueError(
                "retry_after_seconds must be a whole number of seconds"
                f" from 0 to {MAX_RETRY_AFTER_SECONDS}, not {retry_after_seconds!r}"
            )
        super().__init__(reason)
        self.reason = reason
        self.retry_after_seconds = retry_after_seconds
        self.result = result


class Blocked(Exception):
    """Raise it from a handler to mark the issue BLOCKED, with ``reason`` in the ledger."""

    def __init__(self, reason: str = "", *, result: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


class Release:
    """The release a handler's end asks for: outcome, reason, retryAfterSeconds, result (unchecked)."""

    __slots__ = ("outcome", "reason", "retry_after_seconds", "result")

    def __init__(
        self, outcome: str, reason: Optional[str], retry_after_seconds: Optional[int] = None, result: Any = None
    ):
        self.outcome = outcome
        self.reason = None if reason is None else reason[:MAX_REASON_CHARS]
        self.retry_after_seconds = retry_after_seconds
        self.result = result


def release_of(error: BaseException) -> Release:
    """The release for what a handler raised."""
    if isinstance(error, Requeue):
        default = (
            "requeued by the worker"
            if error.retry_after_seconds is None
            else f"not now: retry after {error.retry_after_seconds} s"
        )
        return Release("REQUEUE", error.reason or default, error.retry_after_seconds, error.result)
    if isinstance(error, Blocked):
        return Release("BLOCKED", error.reason or "blocked", None, error.result)
    return Release("FAILED", str(error) or type(error).__name__)


def result_of(value: Any) -> Tuple[Any, Optional[str]]:
    """``(result to send, why it was left out)``: the JSON value as the API will keep it, or None and the reason."""
    if value is None:
        return None, None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as err:
        return None, f"it is not JSON ({err})"
    size = len(text.encode("utf-8"))
    if size > MAX_JSON_BYTES:
        return None, f"it is {size} bytes of JSON, over the {MAX_JSON_BYTES} the API keeps"
    return json.loads(text), None
