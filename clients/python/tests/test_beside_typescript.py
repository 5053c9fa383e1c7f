"""A Python worker drains a queue beside a TypeScript worker (the SDK's work()).

The wrapper (test/python/python.test.ts) made BATON_ISSUE_COUNT unassigned
issues, starts the TypeScript worker once this one prints its first
"handling" line, and checks the two together: every issue handled once in
all, by one side or the other, each released DONE once in the ledger. Here:
each issue this worker handled, it handled once and released DONE with the
handler's result; the ids go to BATON_HANDLED_FILE for the wrapper.
"""

import collections
import os
import threading
import time
import unittest

from _support import Server, env

from baton_client import Baton


class BesideTypeScript(unittest.TestCase):
    def test_each_issue_this_worker_takes_is_handled_once_and_released_done(self):
        server = Server()
        worker = Baton(server.url, env("BATON_AGENT_TOKEN"))
        handled = collections.Counter()
        lock = threading.Lock()

        def handler(job):
            with lock:
                handled[job.issue["id"]] += 1
            print(f"handling {job.issue['id']}", flush=True)
            time.sleep(0.03)  # the work
            return {"by": "python", "epoch": job.lock_epoch}

        worker.work(handler, include_unassigned=True, once=True, concurrency=2)

        self.assertTrue(handled, "the Python worker handled nothing")
        self.assertEqual([n for n in handled.values() if n != 1], [], "an issue handled twice by Python")
        for issue_id in handled:
            issue = server.issue(issue_id)
            self.assertEqual(issue["status"], "DONE")
            self.assertEqual(issue["result"], {"by": "python", "epoch": issue["lockEpoch"]})
            released = [e for e in server.events(issue_id) if e["kind"] == "RELEASED"]
            self.assertEqual([e["reason"] for e in released], ["DONE"])
        path = os.environ.get("BATON_HANDLED_FILE")
        if path:
            with open(path, "w") as out:
                out.write("\n".join(handled))


if __name__ == "__main__":
    unittest.main()
