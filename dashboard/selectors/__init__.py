"""Reads for the dashboard, one module per page group (the modules of
``dashboard.views`` of the same names). Every function takes the workspace (or an object
already scoped to one); nothing here decides who may read it (that is
``dashboard.access``). A ``*_get`` raises ``MemdeskError`` ("not_found") for a row that
is not there, as memory's and governance's selectors do; the access helpers turn it
into a 404."""
