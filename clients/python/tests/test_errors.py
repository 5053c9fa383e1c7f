"""Bad input and no answer: every failure is a BatonError with a code a caller can act on,
CONFLICT_RETRY is retried as the TypeScript SDK does, and refusals are never retried."""

import socket
import time
import unittest
import uuid

from _fake import FakeServer, Reply
from _support import Server

from baton_client import Baton, BatonError, Requeue

CONFLICT = {
    "errors": [{"message": "conflicting writers", "extensions": {"code": "CONFLICT_RETRY", "outcome": "NOT_APPLIED"}}]
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RequestsAgainstTheServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()

    def test_a_bad_token_is_unauthenticated_and_not_in_the_message(self):
        token = "baton_agent_" + "x" * 43
        with self.assertRaises(BatonError) as caught:
            Baton(self.server.url, token).request("{ me { role } }")
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        self.assertNotIn(token, str(caught.exception))
        self.assertFalse(caught.exception.may_have_applied)

    def test_a_syntax_error_and_an_unknown_field_are_the_api_codes(self):
        with self.assertRaises(BatonError) as caught:
            self.server.board.request("{ me { role ")
        self.assertEqual(caught.exception.code, "GRAPHQL_PARSE_FAILED")
        self.assertIn("Syntax Error", caught.exception.message)
        with self.assertRaises(BatonError) as caught:
            self.server.board.request("{ nope }")
        self.assertEqual(caught.exception.code, "GRAPHQL_VALIDATION_FAILED")

    def test_bad_user_input_keeps_the_message(self):
        with self.assertRaises(BatonError) as caught:
            self.server.board.request('mutation { createIssue(input: { title: "" }) { id } }')
        self.assertEqual(caught.exception.code, "BAD_USER_INPUT")

    def test_work_needs_an_agent_key(self):
        with self.assertRaises(BatonError) as caught:
            self.server.board.work(lambda job: None, once=True)
        self.assertEqual(caught.exception.code, "FORBIDDEN")
        with self.assertRaises(BatonError) as caught:
            Baton(self.server.url, "nope").work(lambda job: None, once=True)
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")

    def test_lock_changes_refusals_are_raised_at_once_not_retried(self):
        started = time.monotonic()
        with self.assertRaises(BatonError) as caught:
            next(iter(Baton(self.server.url, "nope").lock_changes(self.server.company_id)))
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        with self.assertRaises(BatonError) as caught:
            next(iter(self.server.board.lock_changes(str(uuid.uuid4()))))
        self.assertEqual(caught.exception.code, "FORBIDDEN")
        with self.assertRaises(BatonError) as caught:
            next(iter(self.server.board.lock_changes(self.server.company_id, after_seq="9" * 18)))
        self.assertEqual(caught.exception.code, "SEQ_AHEAD")
        self.assertIn("ceilingSeq", caught.exception.extensions)
        self.assertLess(time.monotonic() - started, 5)


class NoAnswer(unittest.TestCase):
    def test_nothing_listening_is_unavailable_and_not_applied(self):
        with self.assertRaises(BatonError) as caught:
            Baton(f"http://127.0.0.1:{free_port()}/graphql", "t").request("{ me { role } }")
        self.assertEqual(caught.exception.code, "UNAVAILABLE")
        self.assertEqual(caught.exception.extensions["outcome"], "NOT_APPLIED")
        self.assertFalse(caught.exception.may_have_applied)

    def test_a_connection_lost_mid_request_or_a_page_that_is_not_graphql_may_have_applied(self):
        for reply in (Reply(cut=True), Reply(status=502, body=b"<html>Bad Gateway</html>")):
            fake = FakeServer(lambda n, body, reply=reply: reply)
            try:
                with self.assertRaises(BatonError) as caught:
                    Baton(fake.url, "t").request("mutation { startRun { id } }")
            finally:
                fake.close()
            self.assertEqual(caught.exception.code, "UNAVAILABLE")
            self.assertEqual(caught.exception.extensions["outcome"], "UNKNOWN")
            self.assertTrue(caught.exception.may_have_applied)
            self.assertEqual(len(fake.requests), 1, "a request that may have been applied is not sent again")

    def test_conflict_retry_is_sent_again_up_to_five_tries(self):
        fake = FakeServer(lambda n, body: Reply(body=CONFLICT if n < 2 else {"data": {"me": {"role": "BOARD"}}}))
        try:
            self.assertEqual(Baton(fake.url, "t").request("{ me { role } }", {"a": 1}), {"me": {"role": "BOARD"}})
            self.assertEqual(len(fake.requests), 3)
            self.assertEqual(fake.requests[2], {"query": "{ me { role } }", "variables": {"a": 1}})
        finally:
            fake.close()
        fake = FakeServer(lambda n, body: Reply(body=CONFLICT))
        try:
            with self.assertRaises(BatonError) as caught:
                Baton(fake.url, "t").request("{ me { role } }")
            self.assertEqual(len(fake.requests), 5)
            self.assertEqual(caught.exception.code, "CONFLICT_RETRY")
            self.assertEqual(caught.exception.extensions["outcome"], "NOT_APPLIED")
        finally:
            fake.close()

    def test_a_bad_retry_after_is_refused_where_it_is_built(self):
        for bad in (-1, 86_401, 1.5, True):
            with self.assertRaises(ValueError):
                Requeue("x", retry_after_seconds=bad)


if __name__ == "__main__":
    unittest.main()
