"""How a worker knows what it still holds (the Holds part of work.py's worker).

Rules:

- A run's lease is renewed by ``heartbeatRun`` on a thread, every third of
  the lease the API gave (``leaseExpiresAt - lastHeartbeatAt``), or every
  ``lease_renewal`` seconds (at most half the lease). A heartbeat answered
  with anything but ``RunUpdated`` loses every job of that run.
- The ledger watch (``lock_changes`` from the newest seq read before the first
  claim, so none of this worker's claims is missed) loses a job when an event
  shows its issue's checkout leave the job's run and the issue's
  ``(checkoutRunId, lockEpoch)`` is no longer the job's; any change to OPEN
  wakes the claim loop.
- The watch never gives up while the worker runs. A refusal
  (``LIMIT_EXCEEDED``: ``connectionsPerKey``, ...; ``BAD_RESPONSE``, any
  unexpected exception) restarts it after its last seq, after the refusal's
  ``retryAfterSeconds`` if it gives one (at most WATCH_RETRY_AFTER_MAX),
  else after WATCH_RETRY_DELAYS (0.5 s growing to 30 s, reset once a stream
  opens). ``EVENTS_PRUNED`` restarts it after ``resumeAfterSeq``,
  ``SEQ_AHEAD`` from the newest seq, and then every running job's hold is
  checked once (what fell in the gap is not in the stream).
- While no ledger stream is open (refused, or reconnecting), each heartbeat
  of a run also reads the issue of each of its running jobs (``IssueHold``):
  a ``(checkoutRunId, lockEpoch)`` that is no longer the job's loses it. A
  read that fails says nothing (it is tried again at the next heartbeat).
- UNAUTHENTICATED from anything is the key refused: every job is lost, the
  heartbeat stops, and the worker stops without another request.
"""

import logging
import threading
from datetime import datetime
from typing import Any, Dict, Optional, Tuple

from . import _documents as ops
from .changes import lock_changes
from .errors import BatonError
from .job import Job

log = logging.getLogger("baton_client")

#: Seconds before the ledger watch starts again after a failure; the last repeats (reset once a stream opens).
WATCH_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
#: The longest wait a refusal's retryAfterSeconds is taken for.
WATCH_RETRY_AFTER_MAX = 300.0


def _instant(text: str) -> datetime:
    """A DateTime of the API (ISO 8601; Python 3.9's fromisoformat does not read "Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _seconds_between(start: str, end: str) -> float:
    return (_instant(end) - _instant(start)).total_seconds()


class Holds:
    """Runs, their heartbeat, the ledger watch and a refused key; state is the worker's (work.py)."""

    def _start_run(self) -> Dict[str, Any]:
        started = self.request(ops.START_RUN)["startRun"]
        lease = max(1.0, _seconds_between(started["lastHeartbeatAt"], started["leaseExpiresAt"]))
        interval = lease / 3 if self.lease_renewal is None else min(self.lease_renewal, lease / 2)
        with self.lock:
            self._stop_heartbeat()
            self.run_ = started
            stop = self.heartbeat_stop = threading.Event()
        threading.Thread(
            target=self._beat, args=(started["id"], interval, stop), name="baton-heartbeat", daemon=True
        ).start()
        log.info("run %s started (lease %.1f s, heartbeat every %.1f s)", started["id"], lease, interval)
        return started

    def _stop_heartbeat(self) -> None:
        with self.lock:
            if self.heartbeat_stop is not None:
                self.heartbeat_stop.set()
                self.heartbeat_stop = None

    def _beat(self, run_id: str, interval: float, stop: threading.Event) -> None:
        while not stop.wait(interval):
            try:
                answer = self.request(ops.HEARTBEAT, {"runId": run_id})["heartbeatRun"]
            except BatonError as err:
                if self._refused(err):
                    return
                log.warning("heartbeat of run %s failed: %s", run_id, err)
                continue
            if answer.get("__typename") != "RunUpdated":
                self._lose_run(run_id, f"run {run_id} is no longer active: {answer.get('message')}")
                return
            if not self.watch_control.live.is_set():
                self._check_holds(run_id, "checked at a heartbeat while the ledger watch is down")

    def _lose_run(self, run_id: str, reason: str) -> None:
        """The run is gone: every job it held is lost; the claim loop starts a new run."""
        with self.lock:
            for job in list(self.running.values()) + self.older:
                if job.run_id == run_id and job._lose(reason):
                    log.warning("hold lost: %s (%s)", job.issue_id, reason)
            if self.run_ is not None and self.run_["id"] == run_id:
                self.run_ = None
                self._stop_heartbeat()
        self.wake.set()

    def _refused(self, err: BaseException) -> bool:
        """True if ``err`` is the key refused: then every hold is lost, and the worker stops without another request."""
        if not isinstance(err, BatonError) or err.code != "UNAUTHENTICATED":
            return False
        with self.lock:
            if self.refused_with is None:
                self.refused_with = BatonError(
                    "UNAUTHENTICATED",
                    "the agent key is no longer accepted (revoked: rotated, or its agent disabled); the worker stopped",
                    err.extensions,
                    err.errors,
                )
                log.error("key refused: stopping without releasing anything (%s)", err.message)
                for job in list(self.running.values()) + self.older:
                    job._lose(self.refused_with.message)
                self.run_ = None
                self._stop_heartbeat()
                self.stopping.set()
                self.changed.notify_all()
        self.wake.set()
        return True

    # ---- the ledger watch --------------------------------------------------

    def _newest_seq(self, company_id: str) -> Optional[str]:
        """Where the ledger watch starts: after the newest final seq, so that it misses none of this worker's claims."""
        try:
            newest = self.request(ops.NEWEST_SEQ, {"companyId": company_id})["lockEvents"]
        except BatonError as err:
            log.warning("live events start from now: reading the ledger's newest seq failed (%s)", err)
            return None
        return newest[0]["seq"] if newest else "0"

    def _watch(self, company_id: str, after_seq: Optional[str]) -> None:
        """A checkout that leaves a job's hold loses that job; a change to OPEN wakes the claim loop.

        Restarted after every failure until the worker stops (this module's docstring says when, and from where).
        """
        gap = False  # the restart skips events: check every hold once the new start is read
        while not self.watch_control.stopped.is_set():
            delay: Optional[float] = None
            try:
                stream = lock_changes(self.endpoint, company_id, after_seq, control=self.watch_control)
                try:
                    if gap:
                        gap = False
                        self._check_holds(None, "checked after a gap in the ledger watch")
                    for change in stream:
                        self._on_change(change)
                        after_seq = change["seq"]  # a restart resumes after it: nothing missed, nothing twice
                finally:
                    stream.close()
                return  # closed: the worker is stopping
            except BatonError as err:
                if self._refused(err):
                    return
                if err.code == "EVENTS_PRUNED":
                    resume = err.extensions.get("resumeAfterSeq")
                    after_seq, gap = (str(resume) if resume is not None else None), True
                elif err.code == "SEQ_AHEAD":
                    after_seq, gap = None, True  # the database was restored: from its newest seq
                retry_after = err.extensions.get("retryAfterSeconds")
                if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool) and retry_after >= 0:
                    delay = min(float(retry_after), WATCH_RETRY_AFTER_MAX)
                what = str(err)
            except Exception as err:  # noqa: BLE001 (whatever broke it, the watch starts again)
                log.debug("ledger watch failed", exc_info=True)
                what = f"{type(err).__name__}: {err}"
            if self.watch_control.stopped.is_set():
                return
            with self.lock:
                failures = self.watch_failures
                self.watch_failures += 1
            if delay is None:
                delay = WATCH_RETRY_DELAYS[min(failures, len(WATCH_RETRY_DELAYS) - 1)]
            log.warning(
                "live events stopped (%s); starting again in %.1f s, holds checked at each heartbeat meanwhile",
                what,
                delay,
            )
            if self.watch_control.stopped.wait(delay):
                return

    def _watch_opened(self) -> None:
        """A ledger stream is open (Control.on_open): the backoff starts over."""
        with self.lock:
            failures, self.watch_failures = self.watch_failures, 0
        if failures:
            log.info("live events resumed")

    def _on_change(self, change: Dict[str, Any]) -> None:
        with self.lock:
            job = self.running.get(change.get("issueId") or "")
        if (
            job is not None
            and change.get("checkoutRunId") != job.run_id
            and not job.lost.is_set()
            and not job._releasing
        ):
            # The event may predate this job's claim (the same run claimed the issue again after losing it):
            # the issue's (checkoutRunId, lockEpoch) now says whether this job's hold is the one that ended.
            reason = (change.get("kind") or "CHANGED") + (f": {change['reason']}" if change.get("reason") else "")
            if not self._still_held(job) and job._lose(reason):
                log.warning("hold lost: %s (%s)", job.issue_id, reason)
        if change.get("status") == "OPEN":
            self.wake.set()

    def _still_held(self, job: Job) -> bool:
        """True if the issue's checkout is still this job's: its run, and its lock epoch (which never comes back)."""
        held = self._hold_of(job)
        return held is not None and held[0]  # no answer: the ledger said the checkout left, believe it

    def _hold_of(self, job: Job) -> Optional[Tuple[bool, Dict[str, Any]]]:
        """Whether the issue's checkout is still this job's, and the issue's (checkoutRunId, lockEpoch); None if
        it could not be read."""
        try:
            issue = self.request(ops.ISSUE_HOLD, {"id": job.issue_id})["issue"]
        except BatonError as err:
            self._refused(err)
            return None
        held = bool(issue) and issue.get("checkoutRunId") == job.run_id and issue.get("lockEpoch") == job.lock_epoch
        return held, issue or {}

    def _check_holds(self, run_id: Optional[str], why: str) -> None:
        """Reads the issue of each running job (of ``run_id``, or every run): a hold that is not the job's any more
        loses it. Used while the ledger watch cannot say so."""
        with self.lock:
            jobs = [
                job
                for job in list(self.running.values()) + self.older
                if (run_id is None or job.run_id == run_id) and not job.lost.is_set() and not job._releasing
            ]
        for job in jobs:
            found = self._hold_of(job)
            if found is None or found[0]:
                continue  # held, or unknown: the next heartbeat asks again
            issue = found[1]
            reason = (
                f"the issue's checkout is no longer this job's (checkoutRunId {issue.get('checkoutRunId')}, "
                f"lock epoch {issue.get('lockEpoch')}; {why})"
            )
            if job._lose(reason):
                log.warning("hold lost: %s (%s)", job.issue_id, reason)
