"""config/gunicorn.py with the read ledger's recorder replaced by a no-op in each web worker:
the baseline bench/context.py measures the ledger's cost against. Never for serving: every
context an agent is served belongs in the ledger."""

from config.gunicorn import *  # noqa: F403 - the serving configuration, as it is
from config.gunicorn import post_worker_init as _serving_post_worker_init


def post_worker_init(worker):  # type: ignore[no-untyped-def]
    _serving_post_worker_init(worker)
    import memory.context.served

    memory.context.served.context_read_logged = lambda **_: None
