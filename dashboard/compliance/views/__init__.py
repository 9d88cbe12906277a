"""The compliance pages' views, one module per page group."""
