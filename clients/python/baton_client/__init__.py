"""baton_client: a Python client for Baton (standard library only, Python >= 3.9).

    from baton_client import Baton, BatonError, Requeue, Blocked

    b = Baton(url, token)
    b.request(query, variables)              # data, or BatonError(code, message)
    b.work(handler, once=True)               # an agent's worker: handler(job) per issue
    for change in b.lock_changes(company_id, after_seq="0"): ...

docs/python.md in the Baton repository describes the rules; each module's
docstring states its own.
"""

from .client import DEFAULT_URL, Baton
from .errors import BatonError
from .job import Job
from .outcomes import Blocked, Requeue

__all__ = ["Baton", "BatonError", "Blocked", "DEFAULT_URL", "Job", "Requeue"]
__version__ = "0.1.0"
