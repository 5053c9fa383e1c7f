"""lock_changes() without after_seq starts from now: from the newest seq when it is called, so a connection cut
before its first event resumes from there, and nothing made while it was down is missed.

The wrapper (test/python/python.test.ts) waits for "stream open" on stdout, then cuts the proxy
(BATON_PROXY_URL) and refuses reconnections while it makes events, lets it reconnect, and ends with END_REASON.
"""

import sys
import threading
import unittest

from _support import Server, env

from baton_client._http import Endpoint
from baton_client.changes import Control, lock_changes

END_REASON = "end of the from-now test"
CLAIM = "mutation($r: ID!) { claimIssue(runId: $r) { __typename ... on IssueClaimed { issue { id } } } }"
RELEASE = (
    "mutation($r: ID!, $i: ID!) "
    '{ releaseIssue(runId: $r, issueId: $i, outcome: REQUEUE, reason: "before") { __typename } }'
)


class FromNow(unittest.TestCase):
    def test_a_stream_from_now_cut_before_its_first_event_misses_nothing(self):
        server = Server()
        # Events from before the start, which the stream must not replay: an agent of its own claims and gives back.
        agent_id, agent = server.agent()
        [before_id] = server.issues([{"title": "before the start", "assigneeAgentId": agent_id}])
        run = agent.request("mutation { startRun { id } }")["startRun"]
        claimed = agent.request(CLAIM, {"r": run["id"]})["claimIssue"]
        self.assertEqual(claimed["issue"]["id"], before_id)
        agent.request(RELEASE, {"r": run["id"], "i": before_id})
        agent.request("mutation($r: ID!) { finishRun(runId: $r, status: SUCCEEDED) { __typename } }", {"r": run["id"]})
        before = server.events()
        self.assertGreaterEqual(len(before), 2)

        control = Control()  # only to say when the stream is open; lock_changes() is what Baton.lock_changes() runs
        stream = lock_changes(
            Endpoint(env("BATON_PROXY_URL"), env("BATON_BOARD_TOKEN")), server.company_id, control=control
        )
        got = []
        failure = []

        def read():
            try:
                for event in stream:
                    got.append(event)
                    if event["kind"] == "FORCE_RELEASED" and event["reason"] == END_REASON:
                        return
            except BaseException as err:  # noqa: BLE001 (reported below)
                failure.append(err)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        # Open once the answer's headers arrive: with no event to send, the API may send them with its first
        # keep-alive (every 12 s), later still on a loaded machine.
        self.assertTrue(control.live.wait(40), "the stream did not open")
        sys.stdout.write("stream open\n")
        sys.stdout.flush()
        reader.join(30)
        self.assertFalse(reader.is_alive(), f"no {END_REASON!r} event after 30 s; got {len(got)} events")
        stream.close()
        self.assertEqual(failure, [])
        ledger = server.events()
        after_start = [e["seq"] for e in ledger if int(e["seq"]) > int(before[-1]["seq"])]
        self.assertEqual([e["seq"] for e in got], after_start)  # each once, in order, none from before
        self.assertEqual(len(got), 10)  # the wrapper's 4 claims and releases, its last claim and the force-release


if __name__ == "__main__":
    unittest.main()
