"""What the tests share: the server the vitest wrapper (test/python/python.test.ts) started,
a board client, fresh agents and issues, the ledger, and deadline-bounded waits.

Environment: BATON_URL, BATON_BOARD_TOKEN, BATON_COMPANY_ID (every test that
talks to a server), BATON_AGENT_TOKEN / BATON_AGENT_ID (the company's first
agent), BATON_ADMIN_TOKEN. A test whose variables are missing is skipped.
"""

import logging
import os
import time
import unittest
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from baton_client import Baton

T = TypeVar("T")

ISSUE = """query($id: ID!) { issue(id: $id) {
  id title status assigneeAgentId checkoutRunId executionRunId attemptCount notBefore lockEpoch result } }"""
EVENTS = """query($c: ID!, $after: ID, $issue: ID) {
  lockEvents(companyId: $c, afterSeq: $after, issueId: $issue, first: 1000) {
    seq issueId kind status runId agentId checkoutRunId reason at } }"""


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set: run the suite through test/python/python.test.ts")
    return value


def wait_until(check: Callable[[], Optional[T]], what: str, timeout: float = 10.0) -> T:
    """Polls ``check`` until it returns something other than None/False; AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


class Server:
    """The company the wrapper made, seen through its board key."""

    def __init__(self) -> None:
        self.url = env("BATON_URL")
        self.company_id = env("BATON_COMPANY_ID")
        self.board = Baton(self.url, env("BATON_BOARD_TOKEN"))

    def agent_key(self) -> Tuple[str, str]:
        """A new agent of the company: its id and its key."""
        made = self.board.request(
            "mutation($n: String!) { createAgent(name: $n) { agent { id } apiKey } }",
            {"n": f"py-{uuid.uuid4().hex[:12]}"},
        )["createAgent"]
        return made["agent"]["id"], made["apiKey"]

    def agent(self) -> Tuple[str, Baton]:
        """A new agent of the company: its id and a client with its key."""
        agent_id, key = self.agent_key()
        return agent_id, Baton(self.url, key)

    def issues(self, inputs: List[Dict[str, Any]]) -> List[str]:
        made = self.board.request(
            "mutation($i: [CreateIssueInput!]!) { createIssues(inputs: $i) { id } }", {"i": inputs}
        )
        return [issue["id"] for issue in made["createIssues"]]

    def issue(self, issue_id: str) -> Dict[str, Any]:
        return self.board.request(ISSUE, {"id": issue_id})["issue"]

    def run(self, run_id: str) -> Dict[str, Any]:
        return self.board.request(
            "query($id: ID!) { run(id: $id) { id status lastHeartbeatAt leaseExpiresAt } }", {"id": run_id}
        )["run"]

    def events(self, issue_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The company's ledger (or one issue's), every page, ascending."""
        out: List[Dict[str, Any]] = []
        after = "0"
        while True:
            page = self.board.request(EVENTS, {"c": self.company_id, "after": after, "issue": issue_id})["lockEvents"]
            out.extend(page)
            if len(page) < 1000:
                return out
            after = page[-1]["seq"]


class Logged(logging.Handler):
    """Every line the worker logs (baton_client), to wait on what it decided."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def __enter__(self):
        self.logger = logging.getLogger("baton_client")
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)
