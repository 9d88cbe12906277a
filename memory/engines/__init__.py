"""Observer and Reflector engines. Each engine turns plain data into plain data; the
pipeline services (``memory/pipeline.py``) load rows, call an engine, and store results."""
