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
  wakes the claim loop. If the watch fails, polling goes on without it.
- UNAUTHENTICATED from anything is the key refused: every job is lost, the
  heartbeat stops, and the worker stops without another request.
"""

import logging
import threading
from datetime import datetime
from typing import Any, Dict, Optional

from . import _documents as ops
from .changes import lock_changes
from .errors import BatonError
from .job import Job

log = logging.getLogger("baton_client")


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
        """A checkout that leaves a job's hold loses that job; a change to OPEN wakes the claim loop."""
        while not self.watch_control.stopped.is_set():
            try:
                for change in lock_changes(self.endpoint, company_id, after_seq, control=self.watch_control):
                    self._on_change(change)
                return
            except BatonError as err:
                if self._refused(err):
                    return
                if err.code == "EVENTS_PRUNED":
                    log.warning("live events resume from now: the ledger was pruned past this worker's place")
                    after_seq = None
                    continue
                log.warning("live events stopped; waiting by polling (%s)", err)
                return
            except Exception:  # noqa: BLE001 (the watch is an optimisation: polling goes on without it)
                log.exception("live events stopped; waiting by polling")
                return

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
        try:
            issue = self.request(ops.ISSUE_HOLD, {"id": job.issue_id})["issue"]
        except BatonError as err:
            self._refused(err)
            return False  # the ledger said the checkout left: believe it
        return bool(issue) and issue.get("checkoutRunId") == job.run_id and issue.get("lockEpoch") == job.lock_epoch
