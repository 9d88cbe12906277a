"""A dashboard search that matched values the pages show masked, recorded in the audit
trail as a reveal is, without the words searched for.

A search tells what it matches: a list that answers "1 conversation matches" to a card
number says whose card it is, even if every page masks the number. So the dashboard
matches messages as a role sees them (``governance.redaction.masking``); only a role
that may reveal the values (``Capability.REVEAL_PII``, checked by the caller) also
matches them, and each search of theirs whose results a masked value accounts for
writes ``message.search_masked`` here. The trail keeps a keyed digest of the query,
never the query: audit events are append-only, and an erasure could never take a
typed e-mail address back out of one.
"""

from __future__ import annotations

import uuid
from typing import Literal

from django.utils.crypto import salted_hmac

from core.actors import Actor
from governance.audit.writer import audit_record

QUERY_DIGEST_SALT = "memdesk.governance.redaction.masked_search.query"


def query_digest(query: str, *, workspace_id: uuid.UUID) -> str:
    """A keyed digest of a query, the same for the same words in any case and spacing
    ("Whitfield", " WHITFIELD "): enough to tell that two searches asked the same, and
    for a person holding a value to find who searched for it (digesting it again here,
    with the key), never the value. The key is SECRET_KEY, as for the policy's list
    digests: a short value digested without a secret could be found by trying
    candidates."""
    words = " ".join(query.casefold().split())
    digest = salted_hmac(QUERY_DIGEST_SALT, f"{workspace_id}|{words}", algorithm="sha256")
    return digest.hexdigest()[:16]


def masked_search_record(
    *,
    workspace_id: uuid.UUID,
    actor: Actor,
    page: Literal["conversations", "search"],
    query: str,
    matches: int,
    masked_matches: int,
) -> None:
    """Record that ``actor`` searched ``page`` (the conversation list, or /search/) for
    ``query`` and was answered with ``matches`` results, ``masked_matches`` of them
    owed to a masked value (a hit marked inside one; a conversation listed only for
    one). The caller calls this only when ``masked_matches`` is not 0: a search that
    matched nothing masked told nothing a page does not show."""
    audit_record(
        workspace_id=workspace_id,
        actor=actor,
        action="message.search_masked",
        target_type="workspace",
        target_id=str(workspace_id),
        after={
            "page": page,
            "queryDigest": query_digest(query, workspace_id=workspace_id),
            "matches": matches,
            "maskedMatches": masked_matches,
        },
    )
