"""A conversation's raw transcript, streamed, masked for every role."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import reverse
from django.utils.html import escape
from django.views.decorators.http import require_GET

from dashboard.access import get_conversation_for_user
from governance.redaction.masking import transcript_rows
from memory.models import Conversation

TRANSCRIPT_NOT_SCANNED = "  [not scanned for personal data yet: nothing in it is masked]"


def _transcript_lines(conversation: Conversation) -> Iterator[str]:
    yield f"Conversation {conversation.pk}\n"
    yield f"Workspace:  {conversation.workspace.name}\n"
    yield f"End user:   {conversation.user_id or '-'}\n"
    yield f"Title:      {conversation.shown_title or '-'}\n"
    yield f"Started:    {conversation.created_at:%Y-%m-%d %H:%M:%S} UTC\n"
    yield "Personal data the scan found is shown as <ENTITY_TYPE>.\n\n"
    for seq, role, name, created_at, tool_name, content, pending in transcript_rows(
        conversation=conversation
    ):
        speaker = f"{role} ({tool_name})" if tool_name else role
        if name:
            speaker = f"{name} ({speaker})"
        note = TRANSCRIPT_NOT_SCANNED if pending else ""
        yield f"#{seq}  {created_at:%Y-%m-%d %H:%M:%S}  {speaker}{note}\n{content}\n\n"


TRANSCRIPT_STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:1rem auto;max-width:70rem;padding:0 1rem}"
    "pre{font:13px/1.45 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}"
    "h1{font-size:1.2rem;overflow-wrap:anywhere}"
)


def _transcript_page(conversation: Conversation, lines: Iterator[str]) -> Iterator[str]:
    title = escape(conversation.shown_title or "untitled conversation")
    yield (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Transcript · {title} · Memdesk</title><style>{TRANSCRIPT_STYLE}</style>"
        f"</head><body><h1>Transcript: {title}</h1>"
        f'<p><a href="?format=text">Plain text</a> · '
        f'<a href="{reverse("dashboard:conversation_detail", args=[conversation.pk])}">'
        f"Back to the conversation</a></p><pre>"
    )
    for line in lines:
        yield escape(line)
    yield "</pre></body></html>"


@require_GET
@login_required
def conversation_transcript(
    request: HttpRequest, conversation_id: uuid.UUID
) -> StreamingHttpResponse:
    """The raw transcript, streamed: the fast path for urgent review (no models, no
    templates). A titled page whose long lines wrap, every character escaped and no
    script allowed to run; ``?format=text`` is the same as plain text. The values the
    scan found are masked for every role; compliance and admin reveal them per message
    on the conversation page, where each reveal is audited."""
    _, conversation = get_conversation_for_user(request, conversation_id)
    lines = _transcript_lines(conversation)
    if request.GET.get("format") == "text":
        response = StreamingHttpResponse(lines, content_type="text/plain; charset=utf-8")
    else:
        response = StreamingHttpResponse(
            _transcript_page(conversation, lines), content_type="text/html; charset=utf-8"
        )
        # Escaped, and even so: nothing in a message may load or run anything here.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["Cache-Control"] = "private, no-store"
    return response
