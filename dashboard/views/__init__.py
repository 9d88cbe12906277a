"""The dashboard's pages for the product, one module per page group: conversations
(the list and the conversation page), context, transcript, notes (correcting
observations and reflections), pins, runs, search, end users, metrics, escalations,
members and settings (workspace, API keys, memory settings). The compliance pages are
``dashboard.compliance``.

Every view is a small function: sign-in required, one access helper resolves the
workspace and checks the capability (another workspace's object is 404, a missing
capability is a 403 page naming the role), then a selector reads or a memory service
writes. htmx requests get the page's partial (``"page.html#name"``); every link and form
also works without JavaScript.
"""
