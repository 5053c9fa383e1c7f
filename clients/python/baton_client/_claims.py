"""How a worker claims (the Claims part of work.py's worker).

Rules:

- With ``concurrency`` 1: ``claimIssue`` then ``acquireExecution``; an issue
  whose acquisition is refused is released REQUEUE at once. Above 1:
  ``claimIssues(acquireExecution: true)`` for the free slots; a batch the API
  refuses as too large an answer (LIMIT_EXCEEDED) is asked again at half the
  size, and that size is kept.
- RunNotActive from a claim loses the run; the next claim starts a new one
  (it says nothing of the queue, so ``once`` does not stop on it).
- A claim, or the acquisition after it, that may have been applied without an
  answer (or a release that failed: _jobs.py) leaves the run "unsure": it
  claims nothing more on it, finishes it once its jobs are done (finishRun
  releases whatever the run holds), and starts a new one.
- Stopping (SIGTERM) while a claim is on its way: when its answer comes, no
  handler starts and nothing more is sent for it but a release: each issue
  it brought is released ``REQUEUE`` with ``retryAfterSeconds: 0`` (reason
  STOPPING_REASON). That charges no attempt: from ``IN_PROGRESS`` (after
  ``acquireExecution``, or ``claimIssues(acquireExecution: true)``) a
  REQUEUE with ``retryAfterSeconds`` gives back the attempt the acquisition
  charged, and from ``CLAIMED`` nothing was charged (the acquisition is not
  sent). Leaving it to the final ``finishRun`` would not do: its
  ``RUN_FINISHED`` release keeps an ``IN_PROGRESS`` issue's attempt charged.
  A release that fails is left to that ``finishRun``.
- Nothing claimable: with ``once`` and nothing running, the loop ends;
  otherwise it waits for a wake (a ledger change to OPEN, a job's end, a lost
  run) or a poll of IDLE_MIN doubling to IDLE_MAX seconds.
"""

import logging
from typing import Any, Dict, List, Optional

from . import _documents as ops
from .errors import BatonError

log = logging.getLogger("baton_client")

IDLE_MIN = 0.1
IDLE_MAX = 2.0
#: Answers after which sending the request again later is worth it (nothing is known to be wrong with it).
TRANSIENT_CODES = frozenset({"UNAVAILABLE", "CONFLICT_RETRY", "INTERNAL_SERVER_ERROR"})
#: The reason of the release that gives back what a claim answered after SIGTERM brought.
STOPPING_REASON = "the worker is stopping: not started"


class Claims:
    """The claim loop; state is the worker's (work.py)."""

    def _claim_until_stopped(self) -> None:
        idle = IDLE_MIN
        while not self.stopping.is_set():
            self.wake.clear()
            with self.lock:
                run, unsure, busy = self.run_, self.unsure, self._busy()
            if run is not None and unsure == run["id"]:
                if busy:
                    self.wake.wait(IDLE_MAX)
                    continue
                log.warning(
                    "finishing run %s: it may hold an issue no job works on (an unanswered claim or release)", run["id"]
                )
                with self.lock:
                    self.run_, self.unsure = None, None
                    self._stop_heartbeat()
                self._finish_run(run["id"])
                run = None
            if run is None:
                run = self._new_run(idle)
                if run is None or self.stopping.is_set():
                    idle = min(idle * 2, IDLE_MAX)
                    continue
            if busy >= self.concurrency:
                self.wake.wait(IDLE_MAX)
                continue
            failed = False
            try:
                started = self._claim(run)
            except BatonError as err:
                failed, started = True, 0
                if self._refused(err):
                    break
                log.warning("claim failed: %s", err)
                if err.may_have_applied:
                    with self.lock:
                        self.unsure = run["id"]
            if self.stopping.is_set():
                break
            if started is None:
                continue  # the run was lost: claim again with a new one (it says nothing of the queue)
            if started:
                idle = IDLE_MIN
                continue
            with self.lock:
                busy = self._busy()
            if self.once and not busy and not failed:
                break
            self.wake.wait(idle)
            idle = min(idle * 2, IDLE_MAX)

    def _new_run(self, wait: float) -> Optional[Dict[str, Any]]:
        """A new run after the last one was lost; None (after a wait) if the API could not start one just now."""
        try:
            return self._start_run()
        except BatonError as err:
            if self._refused(err):
                return None
            if err.code not in TRANSIENT_CODES:
                raise
            log.warning("starting a run failed: %s", err)
            self.wake.wait(wait)
            return None

    def _claim(self, run: Dict[str, Any]) -> Optional[int]:
        """Claims what there is room for; how many jobs it started, or None if the run is not active any more."""
        run_id = run["id"]
        if self.concurrency > 1:
            with self.lock:
                limit = min(self.concurrency - self._busy(), self.batch)
            try:
                answer = self.request(
                    ops.CLAIM_MANY, {"runId": run_id, "limit": limit, "includeUnassigned": self.include_unassigned}
                )["claimIssues"]
            except BatonError as err:
                if err.code != "LIMIT_EXCEEDED" or limit == 1:
                    raise
                self.batch = max(1, limit // 2)  # refused before anything was claimed: ask for fewer
                log.info("claiming at most %d issues at once: the API refused an answer that large", self.batch)
                return self._claim(run)
            if answer["__typename"] == "RunNotActive":
                self._lose_run(run_id, answer.get("message") or "run not active")
                return None
            issues = (answer.get("issues") or []) if answer["__typename"] == "IssuesClaimed" else []
            if self.stopping.is_set():
                self._give_back([issue["id"] for issue in issues], run_id)
                return 0
            for issue in issues:
                self._launch(issue, run_id)
            return len(issues)
        answer = self.request(ops.CLAIM, {"runId": run_id, "includeUnassigned": self.include_unassigned})["claimIssue"]
        if answer["__typename"] == "RunNotActive":
            self._lose_run(run_id, answer.get("message") or "run not active")
            return None
        if answer["__typename"] != "IssueClaimed":
            return 0
        issue_id = answer["issue"]["id"]
        if self.stopping.is_set():
            self._give_back([issue_id], run_id)  # CLAIMED: not acquired, so nothing is charged
            return 0
        try:
            acquired = self.request(ops.ACQUIRE, {"runId": run_id, "issueId": issue_id})["acquireExecution"]
            if acquired["__typename"] == "ExecutionAcquired":
                if self.stopping.is_set():
                    self._give_back([issue_id], run_id)  # IN_PROGRESS: the release gives the attempt back
                    return 0
                self._launch(acquired["issue"], run_id)
                return 1
            if acquired["__typename"] == "RunNotActive":
                self._lose_run(run_id, acquired.get("message") or "run not active")
                return None
            log.warning("could not start claimed issue %s (%s); releasing it", issue_id, acquired["__typename"])
            self.request(
                ops.RELEASE,
                {"runId": run_id, "issueId": issue_id, "outcome": "REQUEUE", "reason": acquired.get("message")},
            )
            return 0
        except BatonError as err:
            if not self._refused(err):
                with self.lock:
                    self.unsure = run_id  # it holds an issue it is not working on: finishing the run releases it
            raise

    def _give_back(self, issue_ids: List[str], run_id: str) -> None:
        """Releases what a claim answered after SIGTERM brought, without starting it: REQUEUE, retryAfterSeconds 0,
        which charges no attempt (this module's docstring); a release that fails is left to the run's finishRun."""
        if self.refused_with is not None:
            return  # the key was refused: no request more
        for issue_id in issue_ids:
            try:
                answer = self.request(
                    ops.RELEASE,
                    {
                        "runId": run_id,
                        "issueId": issue_id,
                        "outcome": "REQUEUE",
                        "reason": STOPPING_REASON,
                        "retryAfterSeconds": 0,
                    },
                )["releaseIssue"]
            except BatonError as err:
                if self._refused(err):
                    return
                log.warning("giving back %s failed: %s; finishing the run releases it", issue_id, err)
                continue
            if answer["__typename"] == "IssueReleased":
                log.info("gave back %s: claimed as the worker was stopping", issue_id)
            else:
                log.warning("giving back %s refused: %s: %s", issue_id, answer["__typename"], answer.get("message"))
