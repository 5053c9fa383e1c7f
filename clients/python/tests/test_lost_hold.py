"""A lost hold sets job.lost, and the worker never releases that issue; the heartbeat keeps the lease."""

import threading
import unittest

from _fake import RelayProxy
from _support import Logged, Server, wait_until

from baton_client import Baton, BatonError

FORCE_RELEASE = (
    'mutation($i: ID!) { forceReleaseIssue(issueId: $i, reason: "the operator took it back") { __typename } }'
)
FINISH_RUN = "mutation($r: ID!) { finishRun(runId: $r, status: CANCELLED) { __typename } }"
ROTATE = "mutation($a: ID!) { rotateAgentKey(agentId: $a) { apiKey } }"
CANCEL = "mutation($i: ID!) { updateIssue(id: $i, input: { status: CANCELLED }) { __typename } }"


class LostHold(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    def kinds(self, issue_id):
        return [(e["kind"], e["reason"]) for e in self.server.events(issue_id)]

    def force_released_then_claimed_again(self, ledger_held: bool):
        """The board force-releases the issue mid-handler; the same worker (same run) claims it again in its
        second slot. The first handler then returns: a release by it would release the second hold.
        With ``ledger_held``, the worker's ledger stream is held back until the second job runs, so only
        the claim tells the worker that the first hold had ended. Returns the first job's lost_reason."""
        agent_id, key = self.server.agent_key()
        [issue_id] = self.server.issues([{"title": "taken back", "assigneeAgentId": agent_id}])
        seen = {}
        second_started = threading.Event()

        def first_job_ended():
            """The worker's word on the first job's end: "not releasing ID" (or, were it wrong, "released ID")."""
            ends = (f"not releasing {issue_id}", f"released {issue_id}", f"release of {issue_id}")
            return any(line.startswith(ends) for line in logged.lines)

        def handler(job):
            if job.lock_epoch == 1:
                self.server.board.request(FORCE_RELEASE, {"i": issue_id})
                seen["first lost"] = job.lost.wait(10)
                seen["first reason"] = job.lost_reason
                seen["first run"] = job.run_id
                wait_until(second_started.is_set, "the worker to claim the issue again")
                return {"stale": True}
            second_started.set()
            wait_until(first_job_ended, "the first job's end")
            seen["while second runs"] = self.server.issue(issue_id)
            seen["second run"] = job.run_id
            return {"fresh": True}

        def before(name):
            if ledger_held and name == "LockChanges":
                wait_until(second_started.is_set, "the second job", timeout=15)

        proxy = RelayProxy(self.server.url, before)
        try:
            with Logged() as logged:
                Baton(proxy.url, key).work(handler, once=True, concurrency=2)
        finally:
            proxy.close()

        self.assertTrue(seen["first lost"], "job.lost was not set")
        self.assertEqual(seen["first run"], seen["second run"])
        during = seen["while second runs"]
        self.assertEqual(
            (during["status"], during["lockEpoch"], during["checkoutRunId"]), ("IN_PROGRESS", 2, seen["second run"])
        )
        self.assertTrue(any(line.startswith(f"not releasing {issue_id}") for line in logged.lines), logged.lines)
        issue = self.server.issue(issue_id)
        self.assertEqual((issue["status"], issue["result"]), ("DONE", {"fresh": True}))
        released = [reason for kind, reason in self.kinds(issue_id) if kind in ("RELEASED", "FORCE_RELEASED")]
        self.assertEqual(released, ["the operator took it back", "DONE"])
        return seen["first reason"]

    def test_a_force_released_issue_is_lost_and_not_released_even_once_this_run_holds_it_again(self):
        reason = self.force_released_then_claimed_again(ledger_held=False)
        # Whichever the worker heard first: the ledger's FORCE_RELEASED, or its own claim of the issue again.
        self.assertRegex(reason, r"^(FORCE_RELEASED: the operator took it back|issue claimed again \(lock epoch 2\))")

    def test_claiming_an_issue_again_loses_the_job_still_running_on_it_before_the_ledger_says_so(self):
        reason = self.force_released_then_claimed_again(ledger_held=True)
        self.assertTrue(reason.startswith("issue claimed again (lock epoch 2)"), reason)

    def test_an_event_from_before_the_claim_does_not_lose_the_job(self):
        """The ledger watch starts from the seq the worker read first; the board frees the issue just after that
        read, and the worker claims it. The watch (held back until the handler runs) then replays the
        FORCE_RELEASED from before the claim: the issue's checkoutRunId and lockEpoch show the hold is this job's."""
        agent_id, key = self.server.agent_key()
        other_id, other = self.server.agent()
        [issue_id] = self.server.issues([{"title": "freed just before the claim"}])  # unassigned
        run = other.request("mutation { startRun { id } }")["startRun"]
        claimed = other.request(
            "mutation($r: ID!, $i: ID) { claimIssue(runId: $r, issueId: $i) { ... on IssueClaimed { issue { id } } } }",
            {"r": run["id"], "i": issue_id},
        )["claimIssue"]
        self.assertEqual(claimed["issue"]["id"], issue_id)
        handler_runs = threading.Event()

        def before(name):
            if name == "LockChanges":
                wait_until(handler_runs.is_set, "the handler to start", timeout=15)

        def after(name):
            if name == "NewestSeq":  # after the seq the watch starts from, before the worker claims
                self.server.board.request(FORCE_RELEASE, {"i": issue_id})

        proxy = RelayProxy(self.server.url, before, after)
        jobs = []

        def handler(job):
            jobs.append(job)
            handler_runs.set()
            wait_until(lambda: "IssueHold" in proxy.seen or job.lost.is_set(), "the watch to weigh the replayed event")
            return "kept"

        try:
            Baton(proxy.url, key).work(handler, include_unassigned=True, once=True)
        finally:
            proxy.close()
        [job] = jobs
        self.assertFalse(job.lost.is_set(), job.lost_reason)
        self.assertEqual(job.lock_epoch, 2)
        issue = self.server.issue(issue_id)
        self.assertEqual((issue["status"], issue["result"]), ("DONE", "kept"))

    def test_not_lock_owner_after_a_release_whose_answer_was_lost_is_a_lost_hold_when_the_ledger_says_so(self):
        """The board takes the issue back just before the worker's release arrives; that release's answer
        (NotLockOwner) is lost, the release is sent again and answered NotLockOwner: not "an earlier try took
        effect", since the ledger shows the hold ended by FORCE_RELEASED. (test_outcomes has the try that did.)"""
        agent_id, key = self.server.agent_key()
        [issue_id] = self.server.issues([{"title": "taken back under the release", "assigneeAgentId": agent_id}])
        releases = []

        def before(name):
            if name == "WorkRelease" and not releases:
                self.server.board.request(FORCE_RELEASE, {"i": issue_id})
                self.server.board.request(CANCEL, {"i": issue_id})  # not claimable again

        def after(name):
            if name == "WorkRelease":
                releases.append(name)
                return len(releases) == 1  # the first try's answer never arrives

        proxy = RelayProxy(self.server.url, before, after)
        jobs = []
        try:
            with Logged() as logged:
                Baton(proxy.url, key).work(lambda job: jobs.append(job) or {"n": 1}, once=True)
        finally:
            proxy.close()
        [job] = jobs
        self.assertEqual(len(releases), 2)
        self.assertTrue(job.lost.is_set(), logged.lines)
        self.assertEqual(
            job.lost_reason, "NotLockOwner to a release tried again: FORCE_RELEASED: the operator took it back"
        )
        self.assertIn(f"release of {issue_id} refused: the hold was lost (NotLockOwner)", logged.lines)
        self.assertFalse(any("earlier try took effect" in line for line in logged.lines), logged.lines)
        self.assertEqual(
            self.kinds(issue_id),
            [
                ("CLAIMED", None),
                ("EXECUTION_ACQUIRED", None),
                ("FORCE_RELEASED", "the operator took it back"),
                ("STATUS_CHANGED", "OPEN -> CANCELLED"),
            ],
        )

    def test_a_run_finished_elsewhere_loses_its_job_and_a_new_run_takes_the_issue(self):
        agent_id, agent = self.server.agent()
        [issue_id] = self.server.issues([{"title": "run ends", "assigneeAgentId": agent_id}])
        visits = []

        def handler(job):
            visits.append(job)
            if len(visits) == 1:
                agent.request(FINISH_RUN, {"r": job.run_id})  # as if another process finished the run
                self.assertTrue(job.lost.wait(10), "job.lost was not set")
                return "stale"
            return "fresh"

        agent.work(handler, once=True)

        first, second = visits
        self.assertNotEqual(first.run_id, second.run_id)
        self.assertFalse(second.lost.is_set())
        self.assertEqual(self.server.run(first.run_id)["status"], "CANCELLED")  # not finished again by the worker
        self.assertEqual(self.server.run(second.run_id)["status"], "SUCCEEDED")
        issue = self.server.issue(issue_id)
        self.assertEqual((issue["status"], issue["result"]), ("DONE", "fresh"))
        self.assertEqual([r for k, r in self.kinds(issue_id) if k == "RELEASED"], ["RUN_FINISHED", "DONE"])

    def test_a_revoked_key_loses_every_job_releases_nothing_and_is_raised(self):
        agent_id, agent = self.server.agent()
        [issue_id] = self.server.issues([{"title": "revoked", "assigneeAgentId": agent_id}])
        jobs = []

        def handler(job):
            jobs.append(job)
            self.server.board.request(ROTATE, {"a": agent_id})
            job.lost.wait(10)
            return "too late"

        with self.assertRaises(BatonError) as caught:
            agent.work(handler, once=True)
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        [job] = jobs
        self.assertTrue(job.lost.is_set(), "job.lost was not set")
        issue = self.server.issue(issue_id)
        self.assertEqual(
            (issue["status"], issue["checkoutRunId"]), ("IN_PROGRESS", job.run_id)
        )  # its lease will free it
        self.assertEqual([k for k, r in self.kinds(issue_id)], ["CLAIMED", "EXECUTION_ACQUIRED"])
        self.assertEqual(self.server.run(job.run_id)["status"], "RUNNING")

    def test_the_heartbeat_renews_the_lease_every_lease_renewal_seconds(self):
        agent_id, agent = self.server.agent()
        self.server.issues([{"title": "long", "assigneeAgentId": agent_id}])
        beats = set()

        def handler(job):
            def renewed_twice():
                beats.add(self.server.run(job.run_id)["lastHeartbeatAt"])
                return len(beats) >= 3  # the start, then two heartbeats

            wait_until(renewed_twice, "two heartbeats", timeout=5)

        agent.work(handler, once=True, lease_renewal=0.2)
        self.assertGreaterEqual(len(beats), 3)


if __name__ == "__main__":
    unittest.main()
