"""``Baton.work()``: an agent's whole life cycle, in process (as src/client/work.ts).

    start a run -> heartbeat every lease/3 on a thread -> claim, acquire the
    execution lock -> handler(job) on a pool of ``concurrency`` threads ->
    release with the handler's outcome -> ... -> finish the run (SUCCEEDED).

Rules (each part states its own in detail: _claims.py, _jobs.py, _holds.py):

- Claims: ``claimIssue`` + ``acquireExecution`` one at a time, or
  ``claimIssues(acquireExecution: true)`` for the free slots when
  ``concurrency`` > 1. ``include_unassigned`` also claims issues assigned to
  no agent.
- Outcomes: outcomes.py (return -> DONE with the value as ``result``,
  Requeue -> REQUEUE, Blocked -> BLOCKED, anything else -> FAILED).
- A lost hold (job.py) sets ``job.lost``, and the issue is never released by
  this worker. A run that is not active any more loses every job it held; the
  next claim starts a new run. The ledger watch that tells of lost holds is
  restarted after any failure; while it is down, each heartbeat reads the
  holds of the run's running jobs instead (_holds.py).
- A refused key (UNAUTHENTICATED, from any request or the ledger watch)
  loses every job at once; nothing more is claimed, released or finished, and
  ``work()`` raises that BatonError without waiting for the handlers.
- Idle: nothing claimable -> with ``once`` (and nothing running) the run is
  finished (SUCCEEDED) and ``work()`` returns; otherwise it waits for a
  ledger change to OPEN, a handler's end, or a poll (0.1 s doubling up to
  2 s), and claims again.
- SIGTERM (a handler is installed only on the main thread, the previous one
  restored on return) or KeyboardInterrupt: stop claiming, let running
  handlers finish and release their issues, finish the run, return. A claim
  whose answer arrives after SIGTERM starts no handler: its issues are given
  back at once, charging no attempt (_claims.py). A second
  KeyboardInterrupt while draining stops waiting: the running jobs are marked
  lost, the run is finished (which releases them) and KeyboardInterrupt is
  raised. The caller decides whether to exit.
"""

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional

from . import _documents as ops
from ._claims import Claims
from ._holds import Holds
from ._http import Endpoint, request
from ._jobs import Jobs
from .changes import Control
from .errors import BatonError
from .job import Job

__all__ = ["work", "Handler"]

log = logging.getLogger("baton_client")

Handler = Callable[[Job], Any]


def work(
    endpoint: Endpoint,
    handler: Handler,
    include_unassigned: bool = False,
    once: bool = False,
    concurrency: int = 1,
    lease_renewal: Optional[float] = None,
) -> None:
    """Runs the worker until it stops (see this module's docstring); raises BatonError if it cannot work."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if lease_renewal is not None and lease_renewal <= 0:
        raise ValueError("lease_renewal must be a positive number of seconds")
    _Worker(endpoint, handler, include_unassigned, once, int(concurrency), lease_renewal).run()


class _Worker(Claims, Jobs, Holds):
    """One work() call: its state, its life cycle; the parts it is made of do the rest."""

    def __init__(
        self,
        endpoint: Endpoint,
        handler: Handler,
        include_unassigned: bool,
        once: bool,
        concurrency: int,
        lease_renewal: Optional[float],
    ):
        self.endpoint = endpoint
        self.handler = handler
        self.include_unassigned = include_unassigned
        self.once = once
        self.concurrency = concurrency
        self.lease_renewal = lease_renewal
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # notified when a job ends
        self.running: Dict[str, Job] = {}  # the newest job of each issue
        self.older: List[Job] = []  # lost jobs whose issue this worker claimed again while their handler still runs
        self.run_: Optional[Dict[str, Any]] = None
        self.unsure: Optional[str] = None  # a run that may hold an issue no job works on: finished once idle
        self.refused_with: Optional[BatonError] = None
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.heartbeat_stop: Optional[threading.Event] = None
        self.watch_control = Control(on_open=self._watch_opened)
        self.watch_failures = 0  # ledger watch failures since a stream last opened
        self.watch_thread: Optional[threading.Thread] = None
        self.batch = concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="baton-job")

    def request(self, query: str, variables: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return request(self.endpoint, query, variables)

    def run(self) -> None:
        me = self.request(ops.ME)["me"]
        if me.get("role") != "AGENT" or not me.get("companyId"):
            raise BatonError("FORBIDDEN", "work() needs an agent key")
        restore = self._install_sigterm()
        interrupted_again = False
        try:
            self._start_run()
            after_seq = self._newest_seq(me["companyId"])
            self.watch_thread = threading.Thread(
                target=self._watch, args=(me["companyId"], after_seq), name="baton-ledger", daemon=True
            )
            self.watch_thread.start()
            try:
                self._claim_until_stopped()
            except KeyboardInterrupt:
                log.info("interrupted: no more claims; letting running handlers finish")
            self.stopping.set()
            try:
                self._drain()
            except KeyboardInterrupt:
                interrupted_again = True
        finally:
            self.stopping.set()
            self._finish()
            restore()
        if interrupted_again:
            raise KeyboardInterrupt
        if self.refused_with is not None:
            raise self.refused_with

    def _finish(self) -> None:
        """Whatever is still running is no longer this run's; the run is finished (unless the key was refused)."""
        with self.lock:
            for job in list(self.running.values()) + self.older:
                if job._lose("the worker stopped before the handler ended"):
                    log.warning("hold lost: %s (the worker stopped before its handler ended)", job.issue_id)
            run, self.run_ = self.run_, None
            self._stop_heartbeat()
        if run is not None and self.refused_with is None:
            self._finish_run(run["id"])
        self.watch_control.close()
        if self.watch_thread is not None:
            self.watch_thread.join(timeout=5)
        self.pool.shutdown(wait=False)

    def _finish_run(self, run_id: str) -> None:
        """finishRun SUCCEEDED, which releases anything the run still holds in the same statement; best effort."""
        try:
            self.request(ops.FINISH_RUN, {"runId": run_id, "status": "SUCCEEDED"})
            log.info("run %s finished", run_id)
        except BatonError as err:
            if not self._refused(err):
                log.warning("finishing run %s failed: %s (its lease will run out)", run_id, err)

    def _busy(self) -> int:
        with self.lock:
            return len(self.running) + len(self.older)

    def _drain(self) -> None:
        with self.changed:
            while self._busy() and self.refused_with is None:
                self.changed.wait(1.0)

    def _install_sigterm(self) -> Callable[[], None]:
        """SIGTERM stops the worker as KeyboardInterrupt does (main thread only).

        Returns what puts the previous handler back.
        """
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
            return lambda: None

        def on_sigterm(signum, frame) -> None:
            log.info("SIGTERM: no more claims; letting running handlers finish")
            self.stopping.set()
            self.wake.set()

        previous = signal.signal(signal.SIGTERM, on_sigterm)
        return lambda: signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
