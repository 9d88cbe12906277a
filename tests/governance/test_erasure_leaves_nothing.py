"""After an end user's erasure no row anywhere holds their values: every table of the
database is read whole (the search index's own tables too) and searched for each value
they wrote, on SQLite and on PostgreSQL (issue 24, "Must show")."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection

from governance.models import AuditEvent, RedactionPolicy
from governance.tasks import erasure_task
from memory.models import Message
from tests.dashboard.factories import observe, reflect

# What the end user and the agent wrote about them: a name, an e-mail, a phone number,
# and a word no policy redacts (the erasure must take it too: it is their data).
VALUES = ("Quill", "zed.quill@example.com", "555 0147", "marmalade")
SAID = (
    "Hi, I am Zed Quill, mail zed.quill@example.com, phone +1 212 555 0147. "
    "The marmalade order never arrived."
)


def _rows_holding(values: tuple[str, ...]) -> dict[str, list[str]]:
    """Every table whose rows, read as text (bytes decoded leniently), hold one of
    ``values`` (case-folded), with the values found."""
    found: dict[str, list[str]] = {}
    wanted = [v.casefold() for v in values]
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor, include_views=False):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            text = "\n".join(
                " ".join(
                    bytes(v).decode("utf-8", "replace") if isinstance(v, bytes | memoryview)
                    else str(v)
                    for v in row
                )
                for row in cursor.fetchall()
            ).casefold()
            hits = [v for v in wanted if v in text]
            if hits:
                found[table] = hits
    return found


def _cached_values() -> list[str]:
    """The values the cache still holds: the local-memory cache of the SQLite run, or
    the Redis of the PostgreSQL run (CACHE_URL), read key by key."""
    store = getattr(cache, "_cache", None)
    if isinstance(store, dict):
        keys = [key.split(":", 2)[-1] for key in list(store)]
    else:  # django-redis
        keys = list(cache.keys("memdesk:*"))  # type: ignore[attr-defined]
    text = " ".join(str(cache.get(key)) for key in keys).casefold()
    return [v for v in VALUES if v.casefold() in text]


@pytest.mark.django_db(transaction=True)
def test_after_an_erasure_no_table_holds_the_end_users_values(
    curator_api, admin_api, workspace
):
    RedactionPolicy.objects.update_or_create(workspace=workspace, defaults={"keep_originals": True})
    made = curator_api.post(
        "/v1/conversations", {"userId": "cust-8841", "title": "Zed Quill's order"}, format="json"
    )
    conversation_id = made.json()["id"]
    base = f"/v1/conversations/{conversation_id}"
    for n, content in enumerate([SAID, "Sorry to hear that, Zed Quill. I will check."]):
        sent = curator_api.post(
            f"{base}/messages",
            {"role": "user" if n == 0 else "assistant", "content": content},
            format="json",
            HTTP_IDEMPOTENCY_KEY=f"write-{n}",
        )
        assert sent.status_code == 201, sent.content
    from memory.models import Conversation

    conversation = Conversation.objects.get(pk=conversation_id)
    observe(conversation)
    message = Message.objects.filter(conversation=conversation).order_by("seq").first()
    curator_api.post(f"{base}/pins", {"messageId": str(message.pk)}, format="json")
    note = curator_api.post(
        f"{base}/observations", {"text": f"User said: {SAID}", "reason": "call"}, format="json"
    )
    curator_api.patch(
        f"{base}/observations/{note.json()['id']}",
        {"text": f"Customer wrote: {SAID}", "reason": f"quoting Zed Quill, {VALUES[1]}"},
        format="json",
    )
    curator_api.post(f"{base}/escalations", {"reason": f"{SAID} Call back."}, format="json")
    reflect(conversation)
    curator_api.post(f"{base}/search", {"query": "marmalade order"}, format="json")
    curator_api.get(f"{base}/context")
    assert _rows_holding(VALUES)  # the values are there before the erasure

    erased = admin_api.post(
        "/v1/erasure-requests", {"userId": "cust-8841", "reason": "GDPR"}, format="json"
    )
    assert erasure_task.apply(args=[erased.json()["id"]]).get() == "completed"

    assert _rows_holding(VALUES) == {}
    assert _cached_values() == []
    assert AuditEvent.objects.filter(action="erasure.complete").exists()


@pytest.mark.django_db(transaction=True)
def test_a_deleted_conversations_cached_contexts_go_with_it(curator_api):
    conversation_id = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    base = f"/v1/conversations/{conversation_id}"
    curator_api.post(f"{base}/messages", {"role": "user", "content": SAID}, format="json")
    for fmt in ("text", "json"):
        assert curator_api.get(f"{base}/context?format={fmt}").status_code == 200
    assert _cached_values()  # the reads were cached
    assert curator_api.delete(base).status_code in (200, 204)
    assert _cached_values() == []
