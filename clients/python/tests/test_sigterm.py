"""SIGTERM (or Ctrl-C) to a process in work(): it stops claiming, the running handler
finishes and its issue is released, the run is finished, work() returns, the process exits 0."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from _support import Server, wait_until

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sigterm_worker.py")


class Process:
    """The worker process, its output read line by line on a thread."""

    def __init__(self, token, go_file):
        env = dict(os.environ, BATON_AGENT_TOKEN=token, BATON_GO_FILE=go_file, PYTHONUNBUFFERED="1")
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


if __name__ == "__main__":
    unittest.main()
