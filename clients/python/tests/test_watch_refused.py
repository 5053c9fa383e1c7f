"""The worker's ledger watch never gives up: a refused watch (LIMIT_EXCEEDED, a stream that breaks the format)
is started again, after the refusal's retryAfterSeconds or a bounded backoff, and while it is down each
heartbeat reads the running jobs' holds, so a force-release still sets job.lost.

BATON_URL is an API instance with connectionsPerKey 1 (test/python/python.test.ts starts it).
"""

import threading
import time
import unittest

from _fake import FakeServer, Reply, change, op_name
from _support import Logged, Server, wait_until

from baton_client import Baton
from baton_client._http import Endpoint
from baton_client.changes import Control, lock_changes

FORCE_RELEASE = "mutation($i: ID!, $r: String!) { forceReleaseIssue(issueId: $i, reason: $r) { __typename } }"
CANCEL = "mutation($i: ID!) { updateIssue(id: $i, input: { status: CANCELLED }) { __typename } }"
#: Seconds between the worker's heartbeats in the test.
HEARTBEAT = 0.4


class AgainstAnInstanceWithOneConnectionPerKey(unittest.TestCase):
    def test_a_refused_watch_leaves_holds_checked_at_each_heartbeat_and_comes_back_once_it_may(self):
        server = Server()
        agent_id, key = server.agent_key()
        first, second = server.issues(
            [
                {"title": "taken back while the watch is refused", "assigneeAgentId": agent_id, "priority": "HIGH"},
                {"title": "taken back once the watch is back", "assigneeAgentId": agent_id, "priority": "LOW"},
            ]
        )
        # The key's one connection: another stream of the same key, open before the worker starts.
        slot = Control()
        holder = lock_changes(Endpoint(server.url, key), server.company_id, control=slot)
        threading.Thread(target=lambda: [None for _ in holder], daemon=True).start()
        self.assertTrue(slot.live.wait(10), "the stream holding the slot did not open")
        seen = {}

        def refused():
            return any("LIMIT_EXCEEDED" in line and "connectionsPerKey" in line for line in logged.lines)

        def handler(job):
            if job.issue_id == first:
                wait_until(refused, "the worker's ledger watch to be refused")
                server.board.request(FORCE_RELEASE, {"i": first, "r": "taken back while refused"})
                started = time.monotonic()
                seen["first lost"] = job.lost.wait(HEARTBEAT * 2 + 2)  # a couple of heartbeats, and their requests
                seen["first lost after"] = time.monotonic() - started
                seen["first reason"] = job.lost_reason
                server.board.request(CANCEL, {"i": first})  # not claimable again
                slot.close()  # the slot is free: the watch may open now
                return "stale"
            wait_until(lambda: "live events resumed" in logged.lines, "the ledger watch to open again", timeout=15)
            # Two heartbeats more: a hold check begun while the watch was still down has ended by then.
            beats = {server.run(job.run_id)["lastHeartbeatAt"]}
            wait_until(lambda: beats.add(server.run(job.run_id)["lastHeartbeatAt"]) or len(beats) >= 3, "2 heartbeats")
            server.board.request(FORCE_RELEASE, {"i": second, "r": "taken back once live"})
            seen["second lost"] = job.lost.wait(5)
            seen["second reason"] = job.lost_reason
            server.board.request(CANCEL, {"i": second})
            return "stale too"

        with Logged() as logged:
            Baton(server.url, key).work(handler, once=True, lease_renewal=HEARTBEAT)

        self.assertTrue(seen["first lost"], f"job.lost was not set while the watch was refused: {logged.lines}")
        self.assertRegex(
            seen["first reason"], r"^the issue's checkout is no longer this job's \(checkoutRunId None, lock epoch 1;"
        )
        self.assertTrue(seen["second lost"], "job.lost was not set once the watch was back")
        self.assertEqual(seen["second reason"], "FORCE_RELEASED: taken back once live")  # from the ledger
        for issue_id, reason in ((first, "taken back while refused"), (second, "taken back once live")):
            self.assertIn(f"not releasing {issue_id}: its hold was lost", "\n".join(logged.lines))
            kinds = [(e["kind"], e["reason"]) for e in server.events(issue_id)]
            self.assertEqual(
                kinds,
                [
                    ("CLAIMED", None),
                    ("EXECUTION_ACQUIRED", None),
                    ("FORCE_RELEASED", reason),
                    ("STATUS_CHANGED", "OPEN -> CANCELLED"),
                ],
            )


RUN = {
    "id": "run-1",
    "companyId": "c",
    "agentId": "a",
    "status": "RUNNING",
    "lastHeartbeatAt": "2030-01-01T00:00:00Z",
    "leaseExpiresAt": "2030-01-01T00:01:00Z",
}
ISSUE = {"id": "issue-1", "companyId": "c", "title": "t", "lockEpoch": 1, "attemptCount": 1, "checkoutRunId": "run-1"}
LIMIT = {
    "errors": [
        {
            "message": "too many WebSockets and event streams open for this key (limit connectionsPerKey = 1)",
            "extensions": {"code": "LIMIT_EXCEEDED", "limit": "connectionsPerKey", "max": 1},
        }
    ]
}


class AgainstAScriptedServer(unittest.TestCase):
    def test_the_watch_waits_out_retry_after_then_restarts_after_a_broken_stream_from_its_last_seq(self):
        streams = []  # (when, afterSeq) of each LockChanges
        claims = []

        def script(n, body):
            name = op_name(body)
            if name == "Me":
                return Reply(body={"data": {"me": {"role": "AGENT", "companyId": "c", "agentId": "a"}}})
            if name == "WorkStartRun":
                return Reply(body={"data": {"startRun": RUN}})
            if name == "NewestSeq":
                return Reply(body={"data": {"lockEvents": [{"seq": "5"}]}})
            if name == "LockChanges":
                streams.append((time.monotonic(), body["variables"]["afterSeq"]))
                if len(streams) == 1:  # refused, come back in 1 s (the backoff alone would say 0.5 s)
                    return Reply(status=429, body=LIMIT, headers={"retry-after": "1"})
                if len(streams) == 2:  # opens, one change, then data that is not JSON: BAD_RESPONSE
                    return Reply(events=[change(10), "event: next\ndata: not json\n\n"])
                return Reply(hold=True)
            if name == "WorkClaim":
                claims.append(n)
                if len(claims) == 1:
                    return Reply(body={"data": {"claimIssue": {"__typename": "IssueClaimed", "issue": ISSUE}}})
                return Reply(body={"data": {"claimIssue": {"__typename": "NoIssueAvailable", "message": "none"}}})
            if name == "WorkAcquire":
                return Reply(body={"data": {"acquireExecution": {"__typename": "ExecutionAcquired", "issue": ISSUE}}})
            if name == "WorkRelease":
                return Reply(body={"data": {"releaseIssue": {"__typename": "IssueReleased"}}})
            if name == "WorkFinishRun":
                return Reply(body={"data": {"finishRun": {"__typename": "RunUpdated"}}})
            return Reply(status=400, body={"errors": [{"message": name, "extensions": {"code": "UNEXPECTED"}}]})

        fake = FakeServer(script)
        try:
            with Logged() as logged:
                Baton(fake.url, "t").work(
                    lambda job: wait_until(lambda: len(streams) >= 3, "a third ledger stream", timeout=10), once=True
                )
        finally:
            fake.close()
        self.assertEqual([after for _, after in streams[:3]], ["5", "5", "10"], logged.lines)
        waited = [streams[1][0] - streams[0][0], streams[2][0] - streams[1][0]]
        self.assertGreaterEqual(waited[0], 0.95, "retryAfterSeconds (1) was not waited out")
        self.assertGreaterEqual(waited[1], 0.45)
        self.assertLess(waited[1], 0.9, "the backoff did not start over once a stream opened")
        self.assertIn("live events resumed", logged.lines)
        self.assertTrue(any("BAD_RESPONSE" in line for line in logged.lines), logged.lines)
        self.assertNotIn("UNEXPECTED", "\n".join(logged.lines))


if __name__ == "__main__":
    unittest.main()
