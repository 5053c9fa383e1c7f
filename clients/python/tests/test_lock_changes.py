"""lock_changes(): every seq once, in order, across cut connections: it resumes
with afterSeq = the last seq it yielded and drops any seq at or below it."""

import threading
import unittest

from _fake import FakeServer, Reply, change, op_name, sse
from _support import Server, env

from baton_client import Baton, BatonError

END_REASON = "end of the stream test"


def take(stream, n):
    out = []
    for item in stream:
        out.append(item)
        if len(out) == n:
            break
    return out


class AgainstTheRealServer(unittest.TestCase):
    def test_a_stream_cut_mid_flight_loses_and_repeats_nothing(self):
        """The wrapper cuts the proxy (BATON_PROXY_URL) while it makes events, then ends with END_REASON."""
        proxy_url = env("BATON_PROXY_URL")
        server = Server()
        got = []
        failure = []

        def read():
            try:
                for event in Baton(proxy_url, env("BATON_BOARD_TOKEN")).lock_changes(server.company_id, after_seq="0"):
                    got.append(event)
                    if event["kind"] == "FORCE_RELEASED" and event["reason"] == END_REASON:
                        return
            except BaseException as err:  # noqa: BLE001 (reported below)
                failure.append(err)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(40)
        self.assertFalse(reader.is_alive(), f"no {END_REASON!r} event after 40 s; got {len(got)} events")
        self.assertEqual(failure, [])
        ledger = [e["seq"] for e in server.events()]
        self.assertEqual([e["seq"] for e in got], ledger)
        self.assertGreater(len(ledger), 20)
        self.assertTrue(all(e["companyId"] == server.company_id for e in got))


class AgainstAScriptedServer(unittest.TestCase):
    def test_it_resumes_after_its_last_seq_and_drops_what_is_replayed(self):
        def script(n, body):
            if n == 0:
                return Reply(
                    events=[": keep-alive\n\n", change(10), change(20), change(30)]
                )  # then the connection ends
            if n == 1:
                return Reply(events=[change(20), change(30), change(40), sse("complete", None)])  # a replay overlapping
            return Reply(events=[change(40), change(50)], hold=True)

        fake = FakeServer(script)
        try:
            stream = Baton(fake.url, "t").lock_changes("c", after_seq="0")
            self.assertEqual([e["seq"] for e in take(stream, 5)], ["10", "20", "30", "40", "50"])
            stream.close()
        finally:
            fake.close()
        self.assertEqual([r["variables"]["afterSeq"] for r in fake.requests], ["0", "30", "40"])
        self.assertIn("lockChanged", fake.requests[0]["query"])

    def test_unavailable_is_retried_and_a_pruned_history_is_raised(self):
        unavailable = {
            "errors": [{"message": "database away", "extensions": {"code": "UNAVAILABLE", "outcome": "NOT_APPLIED"}}]
        }
        pruned = {
            "errors": [
                {
                    "message": "pruned",
                    "extensions": {"code": "EVENTS_PRUNED", "resumeAfterSeq": "70", "oldestAvailableSeq": "80"},
                }
            ]
        }
        streams = []

        def script(n, body):
            if op_name(body) == "NewestSeq":
                return Reply(body={"data": {"lockEvents": [{"seq": "3"}]}})
            streams.append(n)
            if len(streams) == 1:
                return Reply(events=[change(5), sse("next", unavailable), sse("complete", None)])
            if len(streams) == 2:
                return Reply(status=503, body=b"proxy says no")  # not an event stream: retried
            return Reply(events=[sse("next", pruned), sse("complete", None)])

        fake = FakeServer(script)
        try:
            stream = Baton(fake.url, "t").lock_changes("c")
            self.assertEqual([op_name(r) for r in fake.requests], ["NewestSeq"])  # "now" is read at the call
            self.assertEqual(next(stream)["seq"], "5")
            with self.assertRaises(BatonError) as caught:
                next(stream)
        finally:
            fake.close()
        self.assertEqual(caught.exception.code, "EVENTS_PRUNED")
        self.assertEqual(caught.exception.extensions["resumeAfterSeq"], "70")
        subscriptions = [r for r in fake.requests if op_name(r) == "LockChanges"]
        self.assertEqual([r["variables"]["afterSeq"] for r in subscriptions], ["3", "5", "5"])

    def test_from_now_the_newest_seq_is_read_again_if_unanswered_and_a_refusal_of_it_is_raised(self):
        def script(n, body):
            if op_name(body) == "NewestSeq":
                if n < 2:  # no answer at the call, nor at the first try when iterated
                    return Reply(cut=True)
                return Reply(body={"data": {"lockEvents": []}})  # an empty ledger: from "0"
            return Reply(events=[change(7)], hold=True)

        fake = FakeServer(script)
        try:
            stream = Baton(fake.url, "t").lock_changes("c")
            self.assertEqual(next(stream)["seq"], "7")
            stream.close()
        finally:
            fake.close()
        self.assertEqual([op_name(r) for r in fake.requests], ["NewestSeq", "NewestSeq", "NewestSeq", "LockChanges"])
        self.assertEqual(fake.requests[3]["variables"]["afterSeq"], "0")

        forbidden = {"errors": [{"message": "not yours", "extensions": {"code": "FORBIDDEN"}}]}
        fake = FakeServer(lambda n, body: Reply(body=forbidden))
        try:
            stream = Baton(fake.url, "t").lock_changes("c")
            with self.assertRaises(BatonError) as caught:
                next(stream)
        finally:
            fake.close()
        self.assertEqual(caught.exception.code, "FORBIDDEN")
        self.assertEqual([op_name(r) for r in fake.requests], ["NewestSeq"])  # refused once, not asked again

    def test_an_event_over_the_bound_is_refused(self):
        fake = FakeServer(
            lambda n, body: (
                Reply(body={"data": {"lockEvents": [{"seq": "1"}]}})
                if op_name(body) == "NewestSeq"
                else Reply(events=["data: " + "x" * (1024 * 1024 + 10) + "\n\n"], hold=True)
            )
        )
        try:
            with self.assertRaises(BatonError) as caught:
                next(iter(Baton(fake.url, "t").lock_changes("c")))
        finally:
            fake.close()
        self.assertEqual(caught.exception.code, "BAD_RESPONSE")


if __name__ == "__main__":
    unittest.main()
