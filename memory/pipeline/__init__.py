"""The Observer and Reflector pipeline: when runs are due (``scheduling``), claiming them
and storing what an engine returns (``runs``), the engine itself (``engines``), the two
kinds of run (``observer``, ``reflector``), a run asked for now (``on_demand``, bounded
by ``waiting``) and the periodic ``sweep``.

Message writes never wait for any of this: they call ``observer_schedule_if_due``, which
at most inserts a PENDING run and enqueues its task after the write commits. A worker
claims the run with a conditional UPDATE that takes a lease (so two workers never run
the same window), and stores the results in one transaction that also checks it still
holds the lease (so a run taken over after a crash, or cancelled, is never stored).
Engine failures leave memory exactly as it was; the messages stay unobserved and
recent. A retryable failure makes the run RETRYING until its next attempt; the last
attempt's failure makes it FAILED.
"""
