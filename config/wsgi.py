from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
application = get_wsgi_application()

# Load the tokenizer's BPE table (~0.3 s of CPU) as the web process starts, not inside
# the first agent request that needs a token count.
from memory.tokens import warm_up  # noqa: E402

warm_up()
