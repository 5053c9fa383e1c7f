"""SIGTERM (or Ctrl-C) to a process in work(): it stops claiming, the running handler
finishes and its issue is released, the run is finished, work() returns, the process exits 0.
SIGTERM while a claim is on its way: no handler starts, what the claim brought is given back
(REQUEUE, no attempt charged), the run is finished, exit 0."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from _fake import RelayProxy
from _support import Server, wait_until

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sigterm_worker.py")


class Process:
    """The worker process, its output read line by line on a thread."""

    def __init__(self, token, go_file, url=None, concurrency=1):
        env = dict(
            os.environ,
            BATON_AGENT_TOKEN=token,
            BATON_GO_FILE=go_file,
            BATON_CONCURRENCY=str(concurrency),
            PYTHONUNBUFFERED="1",
        )
        if url is not None:
            env["BATON_URL"] = url
        self.proc = subprocess.Popen(
            [sys.executable, WORKER], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, prefix, timeout=10.0):
        return wait_until(
            lambda: next((line for line in self.lines if line.startswith(prefix)), None),
            f"{prefix!r} in {self.lines}",
            timeout,
        )

    def output(self):
        return "\n".join(self.lines)


class Sigterm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    def drains_on(self, signum, says):
        agent_id, key = self.server.agent_key()
        ids = self.server.issues([{"title": f"job {i}", "assigneeAgentId": agent_id} for i in range(3)])
        go_file = os.path.join(tempfile.mkdtemp(prefix="baton-py-"), "go")
        worker = Process(key, go_file)
        try:
            running = worker.wait_for("started ").split()[1]
            worker.proc.send_signal(signum)
            worker.wait_for(f"log: {says}")
            # Draining: the handler still runs, its issue still held, nothing else claimed.
            self.assertIsNone(worker.proc.poll())
            self.assertEqual(self.server.issue(running)["status"], "IN_PROGRESS")
            open(go_file, "w").close()
            code = worker.proc.wait(15)
        finally:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait()
            worker.proc.stdout.close()
        self.assertEqual(code, 0, worker.output())
        self.assertIn(f"finished {running}", worker.lines)
        self.assertIn("work returned", worker.lines)
        self.assertIn("SIGTERM handler restored", worker.lines)
        issue = self.server.issue(running)
        self.assertEqual((issue["status"], issue["result"]), ("DONE", {"finished": True}))
        run_id = [e for e in self.server.events(running) if e["kind"] == "CLAIMED"][0]["runId"]
        self.assertEqual(self.server.run(run_id)["status"], "SUCCEEDED")
        for other in ids:
            if other != running:
                self.assertEqual(self.server.events(other), [], "an issue claimed after the signal")
                self.assertEqual(self.server.issue(other)["status"], "OPEN")

    def test_sigterm_drains_then_returns(self):
        self.drains_on(signal.SIGTERM, "SIGTERM: no more claims")

    def test_ctrl_c_drains_then_returns(self):
        self.drains_on(signal.SIGINT, "interrupted: no more claims")

    def gives_back_when_signalled_during(self, operation, concurrency, acquired):
        """SIGTERM reaches the worker (its handler has run) while ``operation``'s answer is held back by a proxy;
        the answer then arrives. ``acquired``: the claim also took the execution lock (an attempt was charged)."""
        agent_id, key = self.server.agent_key()
        ids = self.server.issues([{"title": f"in flight {i}", "assigneeAgentId": agent_id} for i in range(concurrency)])
        go_file = os.path.join(tempfile.mkdtemp(prefix="baton-py-"), "go")
        open(go_file, "w").close()  # a handler started by mistake ends at once, and its issue is released DONE
        workers = []
        signalled = threading.Event()

        def after(name):
            if name == operation and not signalled.is_set():
                signalled.set()
                worker = wait_until(lambda: workers[0] if workers else None, "the worker process")
                worker.proc.send_signal(signal.SIGTERM)
                worker.wait_for("log: SIGTERM: no more claims")  # its handler ran: the answer is still held here

        proxy = RelayProxy(self.server.url, after=after)
        worker = Process(key, go_file, url=proxy.url, concurrency=concurrency)
        workers.append(worker)
        try:
            code = worker.proc.wait(15)
        finally:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait()
            worker.proc.stdout.close()
            proxy.close()
        self.assertTrue(signalled.is_set(), f"no {operation}: {worker.output()}")
        self.assertEqual(code, 0, worker.output())
        self.assertIn("work returned", worker.lines)
        self.assertEqual([line for line in worker.lines if line.startswith("started ")], [], "a handler started")
        for issue_id in ids:
            issue = self.server.issue(issue_id)
            self.assertEqual((issue["status"], issue["attemptCount"], issue["checkoutRunId"]), ("OPEN", 0, None))
            events = self.server.events(issue_id)
            kinds = [(e["kind"], e["reason"]) for e in events]
            self.assertEqual(
                kinds,
                [("CLAIMED", None)]
                + ([("EXECUTION_ACQUIRED", None)] if acquired else [])
                + [("RELEASED", "REQUEUE: the worker is stopping: not started")],
            )
            self.assertIn(f"log: gave back {issue_id}: claimed as the worker was stopping", worker.lines)
            self.assertEqual(self.server.run(events[0]["runId"])["status"], "SUCCEEDED")

    def test_sigterm_while_claim_issue_is_on_its_way_gives_the_claimed_issue_back_unstarted(self):
        self.gives_back_when_signalled_during("WorkClaim", 1, acquired=False)

    def test_sigterm_while_acquire_execution_is_on_its_way_gives_the_issue_and_its_attempt_back(self):
        self.gives_back_when_signalled_during("WorkAcquire", 1, acquired=True)

    def test_sigterm_while_claim_issues_is_on_its_way_gives_every_issue_and_attempt_back(self):
        self.gives_back_when_signalled_during("WorkClaimMany", 2, acquired=True)


if __name__ == "__main__":
    unittest.main()
