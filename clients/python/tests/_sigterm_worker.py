"""The worker test_sigterm.py signals: work() on BATON_CONCURRENCY (default 1) issues at a time, whose
handler prints "started ID", waits for BATON_GO_FILE, and prints "finished ID"."""

import logging
import os
import signal
import sys
import time

from baton_client import Baton


def previous(signum, frame):  # the caller's own SIGTERM handler, which work() must put back
    pass


def say(line):
    """One write per line: the worker's log lines, from other threads, never split it."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def handler(job):
    say(f"started {job.issue['id']}")
    deadline = time.monotonic() + 20
    while not os.path.exists(os.environ["BATON_GO_FILE"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    say(f"finished {job.issue['id']}")
    return {"finished": True}


logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="log: %(message)s")
signal.signal(signal.SIGTERM, previous)
concurrency = int(os.environ.get("BATON_CONCURRENCY") or 1)
Baton(os.environ["BATON_URL"], os.environ["BATON_AGENT_TOKEN"]).work(handler, concurrency=concurrency)
say("work returned")
say("SIGTERM handler restored" if signal.getsignal(signal.SIGTERM) is previous else "SIGTERM handler NOT restored")
