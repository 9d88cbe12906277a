"""The read ledger: every context served to an agent, recorded (``ContextRead``).

``buffer`` keeps a web worker's reads in memory and writes them in batches from a thread of
its own (``ledger_buffer_start``, called by config/gunicorn.py); elsewhere a read is
written at once. ``context_read_logged`` is what the agent edges call, through
memory/context/served.py.
"""
