"""Job: one issue a worker holds while its handler runs.

Rules:

- ``job.issue`` is the issue as claimed (a dict of the Issue fields:
  ``id``, ``title``, ``payload``, ``attemptCount``, ...), ``job.run_id`` the
  run that holds it, ``job.lock_epoch`` the fencing token: pass it to anything
  the handler writes, which must refuse a write with an older epoch.
- ``job.lost`` (a threading.Event) is set the moment the hold is gone: the
  ledger shows the issue's checkout leave this run (a board's
  ``forceReleaseIssue``, recovery), and the issue's ``checkoutRunId`` and
  ``lockEpoch`` confirm that it is this job's hold that ended (an event from
  before the claim does not count); while the ledger watch is down, a
  heartbeat's read of the issue finds its ``(checkoutRunId, lockEpoch)`` no
  longer the job's; the run's heartbeat answers that the run is not active;
  the worker's run claims the same issue again (its earlier hold must have
  ended); a release answers ``NotLockOwner`` (after a try whose answer was
  lost: unless the ledger shows that try took effect) or ``RunNotActive``; or
  the key is refused (``UNAUTHENTICATED``).
  ``job.lost_reason`` says why. The handler should stop; the worker never
  releases a lost issue.
- Once the handler has ended and its release is on its way, the checkout
  leaving the run is that release: the job is not lost by it.
"""

import threading
from typing import Any, Dict, Optional

__all__ = ["Job"]


class Job:
    """One claimed issue, as the handler sees it."""

    def __init__(self, issue: Dict[str, Any], run_id: str) -> None:
        self.issue = issue
        self.run_id = run_id
        self.lock_epoch: int = issue["lockEpoch"]
        #: Which attempt of the issue this is (1 for the first).
        self.attempt: int = issue.get("attemptCount") or 0
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        self._lock = threading.Lock()
        self._releasing = False

    @property
    def issue_id(self) -> str:
        return self.issue["id"]

    def _lose(self, reason: str, even_releasing: bool = False) -> bool:
        """Marks the hold lost, unless the release is already on its way (then the checkout moving is that release)."""
        with self._lock:
            if self.lost.is_set() or (self._releasing and not even_releasing):
                return False
            self.lost_reason = reason
            self.lost.set()
            return True

    def _begin_release(self) -> bool:
        """True if the issue is still this run's to release (from now on the release is on its way)."""
        with self._lock:
            if self.lost.is_set():
                return False
            self._releasing = True
            return True

    def __repr__(self) -> str:
        lost = self.lost.is_set()
        return f"Job(issue={self.issue_id!r}, run_id={self.run_id!r}, lock_epoch={self.lock_epoch}, lost={lost})"
