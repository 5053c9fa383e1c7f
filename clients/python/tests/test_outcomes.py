"""A handler's end is its issue's release: return -> DONE (the value its result),
Requeue -> REQUEUE (retry_after_seconds -> notBefore, the attempt given back),
Blocked -> BLOCKED, any other exception -> FAILED with its text as the reason."""

import unittest
from datetime import datetime

from _fake import RelayProxy
from _support import Logged, Server

from baton_client import Baton, Blocked, Requeue


def instant(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Outcomes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    def released(self, issue_id):
        """The reasons of the issue's RELEASED events, in order."""
        return [e["reason"] for e in self.server.events(issue_id) if e["kind"] == "RELEASED"]

    def test_each_outcome_is_released_as_the_handler_said(self):
        agent_id, agent = self.server.agent()
        titles = [
            "done",
            "done-none",
            "done-not-json",
            "requeue-later",
            "requeue-once",
            "blocked",
            "fails",
            "bad-retry",
        ]
        ids = dict(
            zip(
                titles,
                self.server.issues(
                    [
                        {
                            "title": t,
                            "assigneeAgentId": agent_id,
                            "maxAttempts": 1 if t in ("fails", "bad-retry") else 3,
                        }
                        for t in titles
                    ]
                ),
            )
        )
        visits = {t: 0 for t in titles}

        def handler(job):
            title = job.issue["title"]
            visits[title] += 1
            if title == "done":
                return {"answer": 42, "title": title}
            if title == "done-none":
                return None
            if title == "done-not-json":
                return object()  # left out; the issue is released DONE all the same
            if title == "requeue-later":
                raise Requeue("rate limited", retry_after_seconds=120)
            if title == "requeue-once":
                if visits[title] == 1:
                    raise Requeue("not yet")
                return "second visit"
            if title == "blocked":
                raise Blocked("needs a human")
            if title == "fails":
                raise ValueError("the input is bad")
            raise Requeue("too late", retry_after_seconds=86_401)  # bad-retry: ValueError where it is built

        agent.work(handler, once=True)

        issue = {t: self.server.issue(i) for t, i in ids.items()}
        self.assertEqual(issue["done"]["status"], "DONE")
        self.assertEqual(issue["done"]["result"], {"answer": 42, "title": "done"})
        self.assertEqual(self.released(ids["done"]), ["DONE"])
        self.assertEqual((issue["done-none"]["status"], issue["done-none"]["result"]), ("DONE", None))
        self.assertEqual((issue["done-not-json"]["status"], issue["done-not-json"]["result"]), ("DONE", None))

        later = issue["requeue-later"]
        self.assertEqual((later["status"], later["attemptCount"], later["checkoutRunId"]), ("OPEN", 0, None))
        event = [e for e in self.server.events(ids["requeue-later"]) if e["kind"] == "RELEASED"]
        self.assertEqual([e["reason"] for e in event], ["REQUEUE: rate limited"])
        delay = (instant(later["notBefore"]) - instant(event[0]["at"])).total_seconds()
        self.assertAlmostEqual(delay, 120, delta=2)

        self.assertEqual(self.released(ids["requeue-once"]), ["REQUEUE: not yet", "DONE"])
        self.assertEqual((issue["requeue-once"]["status"], issue["requeue-once"]["attemptCount"]), ("DONE", 2))
        self.assertEqual(issue["requeue-once"]["result"], "second visit")

        self.assertEqual(issue["blocked"]["status"], "BLOCKED")
        self.assertEqual(self.released(ids["blocked"]), ["BLOCKED: needs a human"])

        self.assertEqual(issue["fails"]["status"], "ESCALATED")  # FAILED with its one attempt used
        self.assertEqual(self.released(ids["fails"]), ["FAILED: the input is bad"])
        [bad] = self.released(ids["bad-retry"])
        self.assertTrue(bad.startswith("FAILED: retry_after_seconds must be a whole number"), bad)

        self.assertEqual(visits, {**{t: 1 for t in titles}, "requeue-once": 2})

    def test_a_failure_reason_is_cut_to_1000_characters(self):
        agent_id, agent = self.server.agent()
        [issue_id] = self.server.issues([{"title": "long", "assigneeAgentId": agent_id, "maxAttempts": 1}])

        def handler(job):
            raise RuntimeError("x" * 5000)

        agent.work(handler, once=True)
        self.assertEqual(self.released(issue_id), ["FAILED: " + "x" * 1000])

    def test_a_release_whose_answer_was_lost_is_sent_again_and_counted_once(self):
        agent_id, key = self.server.agent_key()
        [issue_id] = self.server.issues([{"title": "answer lost", "assigneeAgentId": agent_id}])
        releases = []

        def after(name):
            if name == "WorkRelease":
                releases.append(name)
                return len(releases) == 1  # the first release is applied, and its answer never arrives

        proxy = RelayProxy(self.server.url, after=after)
        jobs = []
        try:
            with Logged() as logged:
                Baton(proxy.url, key).work(lambda job: jobs.append(job) or {"n": 1}, once=True)
        finally:
            proxy.close()
        self.assertEqual(len(releases), 2)
        self.assertIn(f"released {issue_id}: DONE (an earlier try took effect)", logged.lines)
        self.assertFalse(jobs[0].lost.is_set(), jobs[0].lost_reason)  # the ledger shows this run's release
        issue = self.server.issue(issue_id)
        self.assertEqual((issue["status"], issue["result"]), ("DONE", {"n": 1}))
        self.assertEqual(self.released(issue_id), ["DONE"])


if __name__ == "__main__":
    unittest.main()
