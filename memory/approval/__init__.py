"""Staged approval: new reflections that wait for a person before agents are served them
(``policy``: when; ``flags``: why a reflection is flagged and what it drops; ``services``:
approve, edit and approve, reject; ``queue``: what waits, and how long it waited)."""
