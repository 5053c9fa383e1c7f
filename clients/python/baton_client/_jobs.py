"""How a worker runs a job and releases its issue (the Jobs part of work.py's worker).

Rules:

- Each job runs ``handler(job)`` on the worker's thread pool; its end is the
  release outcomes.py describes.
- A lost job is never released. Launching a job for an issue this worker
  already runs a job for marks the older one lost: the run could claim the
  issue again only because that hold had ended.
- A release that got no answer is sent again (up to RELEASE_TRIES: a release
  is safe to repeat); one that still fails, or is refused for another reason
  (InvalidTransition), leaves the run "unsure", so finishing it releases the
  issue. A result the API refuses (BAD_USER_INPUT) is left out and the
  release sent again without it.
- NotLockOwner after an unanswered try means that try took effect, or that
  the hold was lost before it arrived: the issue's ledger tells which. If
  the first event after this run's newest claim of the issue that takes the
  checkout from the run is a RELEASED by this run with this outcome, the
  issue was released (the job is not lost); anything else (FORCE_RELEASED,
  RECOVERED, ADOPTED, STATUS_CHANGED to CANCELLED, a RUN_FINISHED release)
  loses the job with that event as the reason, and so does a ledger that
  does not show it among the issue's newest LEDGER_EVENTS events within
  LEDGER_WAIT_SECONDS.
- Otherwise NotLockOwner, IssueNotFound or RunNotActive to a release: the
  hold was lost (RunNotActive loses the whole run).
"""

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _documents as ops
from ._claims import TRANSIENT_CODES
from .errors import BatonError
from .job import Job
from .outcomes import Release, release_of, result_of

log = logging.getLogger("baton_client")

#: Tries of one release whose answer did not arrive.
RELEASE_TRIES = 3
#: How many of the issue's newest events are read to tell an unanswered release that took effect from a lost hold.
LEDGER_EVENTS = 200
#: How long the release's event may take to be listed (an event is listed once older transactions have ended).
LEDGER_WAIT_SECONDS = 2.0


class Jobs:
    """Launching, running and releasing jobs; state is the worker's (work.py)."""

    def _launch(self, issue: Dict[str, Any], run_id: str) -> None:
        job = Job(issue, run_id)
        with self.lock:
            if self.refused_with is not None:
                return  # the key was refused meanwhile: nothing more starts
            earlier = self.running.get(job.issue_id)
            if earlier is not None:
                # This run claimed the issue again: the earlier hold had ended, whatever the ledger has shown so far.
                if earlier._lose(f"issue claimed again (lock epoch {job.lock_epoch}): this hold had ended"):
                    log.warning("hold lost: %s (claimed again by this worker)", job.issue_id)
                self.older.append(earlier)
            self.running[job.issue_id] = job
            try:
                self.pool.submit(self._run_job, job)
            except BaseException:
                del self.running[job.issue_id]
                raise
        log.info("handling %s (run %s, lock epoch %s)", job.issue_id, run_id, job.lock_epoch)

    def _run_job(self, job: Job) -> None:
        try:
            try:
                release = Release("DONE", None, None, self.handler(job))
            except BaseException as err:  # noqa: BLE001 (every end of a handler is an outcome)
                release = release_of(err)
                if release.outcome == "FAILED":
                    log.warning("handler failed on %s: %.200r", job.issue_id, err)
            self._release(job, release)
        except Exception:  # noqa: BLE001 (a worker thread must not die silently)
            log.exception("releasing %s failed", job.issue_id)
        finally:
            with self.changed:
                if self.running.get(job.issue_id) is job:
                    del self.running[job.issue_id]
                elif job in self.older:
                    self.older.remove(job)
                self.changed.notify_all()
            self.wake.set()

    def _release(self, job: Job, release: Release) -> None:
        if not job._begin_release():
            log.warning("not releasing %s: its hold was lost (%s)", job.issue_id, job.lost_reason)
            return
        result, why = result_of(release.result)
        if why:
            log.warning("result of %s not kept: %s", job.issue_id, why)
        variables = {
            "runId": job.run_id,
            "issueId": job.issue_id,
            "outcome": release.outcome,
            "reason": release.reason,
            "retryAfterSeconds": release.retry_after_seconds,
            "result": result,
        }
        unknown = False  # an earlier try may have taken effect
        answer = None
        tries = 0
        while answer is None:
            tries += 1
            try:
                answer = self.request(ops.RELEASE, variables)["releaseIssue"]
            except BatonError as err:
                if self._refused(err):
                    return
                if err.code == "BAD_USER_INPUT" and variables["result"] is not None:
                    log.warning("result of %s not kept: the API refused it (%s)", job.issue_id, err.message)
                    variables["result"] = None
                    tries -= 1  # refused before anything changed: not a try of the release itself
                    continue
                unknown = unknown or err.may_have_applied
                if tries >= RELEASE_TRIES or err.code not in TRANSIENT_CODES:
                    log.warning("release of %s failed: %s; finishing the run will release it", job.issue_id, err)
                    self._hold_unreleased(job)
                    return
                time.sleep(0.1 * 2**tries)
        typename = answer["__typename"]
        if typename == "IssueReleased":
            log.info("released %s: %s", job.issue_id, release.outcome)
        elif typename == "NotLockOwner" and unknown and self._earlier_try_released(job, release.outcome):
            log.info("released %s: %s (an earlier try took effect)", job.issue_id, release.outcome)
        elif typename in ("NotLockOwner", "IssueNotFound", "RunNotActive"):
            job._lose(f"{typename}: {answer.get('message')}", even_releasing=True)
            log.warning("release of %s refused: the hold was lost (%s)", job.issue_id, typename)
            if typename == "RunNotActive":
                self._lose_run(job.run_id, answer.get("message") or "run not active")
        else:
            log.warning("release of %s refused: %s: %s", job.issue_id, typename, answer.get("message"))
            self._hold_unreleased(job)

    def _earlier_try_released(self, job: Job, outcome: str) -> bool:
        """True if the ledger shows this job's hold ended by this run's release with ``outcome``; otherwise the job
        is lost, with the event that ended its hold as the reason (this module's docstring)."""
        deadline = time.monotonic() + LEDGER_WAIT_SECONDS
        delay = 0.02
        while True:
            try:
                events = self.request(
                    ops.ISSUE_EVENTS,
                    {"companyId": job.issue.get("companyId"), "issueId": job.issue_id, "first": LEDGER_EVENTS},
                )["lockEvents"]
            except BatonError as err:
                if self._refused(err):
                    return False
                verdict: Optional[Tuple[bool, str]] = None
                why = f"reading the ledger failed: {err}"
            else:
                verdict = _hold_ended_by(events, job, outcome)
                why = "the ledger does not show how this hold ended"
            if verdict is not None or time.monotonic() + delay > deadline:
                break
            time.sleep(delay)  # the event is listed once every older transaction has ended: normally milliseconds
            delay = min(delay * 2, 0.5)
        if verdict is not None and verdict[0]:
            return True
        reason = f"NotLockOwner to a release tried again: {verdict[1] if verdict is not None else why}"
        job._lose(reason, even_releasing=True)
        return False

    def _hold_unreleased(self, job: Job) -> None:
        """The run still holds an issue nobody works on: it claims nothing more, and is finished once its jobs end."""
        with self.lock:
            self.unsure = job.run_id


def _hold_ended_by(events: List[Dict[str, Any]], job: Job, outcome: str) -> Optional[Tuple[bool, str]]:
    """From the issue's newest events (newest first): (True, ...) if the first event after the run's newest claim
    that takes the checkout from the run is the run's own release with ``outcome``; (False, that event) if it is
    anything else; None if no such event is listed (yet)."""
    ascending = list(reversed(events))
    claims = [
        i for i, e in enumerate(ascending) if e.get("kind") in ("CLAIMED", "ADOPTED") and e.get("runId") == job.run_id
    ]
    if not claims:
        return False, f"this run's claim is not among the issue's newest {len(events)} events"
    for event in ascending[claims[-1] + 1 :]:
        if event.get("checkoutRunId") == job.run_id:
            continue  # still this run's (EXECUTION_ACQUIRED, ...)
        reason = event.get("reason") or ""
        mine = (
            event.get("kind") == "RELEASED"
            and event.get("runId") == job.run_id
            and (reason == outcome or reason.startswith(outcome + ": "))
        )
        return mine, f"{event.get('kind')}" + (f": {reason}" if reason else "")
    return None
