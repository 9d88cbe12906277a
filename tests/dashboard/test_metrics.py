"""/metrics/: charts of memory.metrics.pipeline_metrics and the agent metrics
(turn latency, prompt-cache stability, escalations, recall)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from memory.models import ObserverRun, ReflectorRun
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from memory.services.messages import MessageInput, messages_append
from tests.dashboard.factories import ROLES


def test_the_metrics_page_shows_the_agent_metrics(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Timed")
    ten = (timezone.now() - timedelta(days=1)).replace(hour=10, minute=0, second=0, microsecond=0)
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="Hello", created_at=ten),
            MessageInput(role="assistant", content="Hi", created_at=ten + timedelta(seconds=4)),
            MessageInput(role="user", content="Order?", created_at=ten + timedelta(minutes=1)),
            MessageInput(
                role="assistant", content="Sent", created_at=ten + timedelta(minutes=1, seconds=10)
            ),
        ],
    )
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Stuck")

    response = login("viewer").get(f"/metrics/?conversation={conversation.pk}")

    html = response.content.decode()
    data = _metrics(html)
    assert data["turnLatency"]["averageSeconds"] == 7.0
    assert '<span class="stat-value" id="turn-latency">7 s</span>' in html
    assert '<span class="stat-value" id="escalations-open">1 open</span>' in html
    assert '<canvas id="chart-escalations"' in html
    assert data["escalations"]["lastDays"] == 1
    assert '<span class="stat-value" id="cache-stability">–</span>' in html  # no reads yet


HX = {"HTTP_HX_REQUEST": "true"}


def _metrics(html: str) -> dict:
    match = re.search(r'<script id="metrics-data" type="application/json">(.*?)</script>', html)
    assert match, "the page embeds the chart data"
    return json.loads(match.group(1))


@pytest.mark.parametrize("role", ROLES)
def test_every_role_sees_the_workspace_metrics(
    login, role, reflected_conversation, observed_conversation
):
    response = login(role).get("/metrics/")
    assert response.status_code == 200
    html = response.content.decode()
    data = _metrics(html)
    assert data["scope"]["conversationId"] is None
    assert data["observer"]["total"] == 2 and data["reflector"]["total"] == 1
    assert len(data["days"]) == 30 and data["daily"]["observer"][-1]["runs"] == 2
    today = data["daily"]["observer"][-1]
    assert today["durationMaxMs"] >= today["durationAvgMs"] >= 0  # durations over time
    assert data["daily"]["observer"][0]["durationAvgMs"] is None  # no runs that day
    for chart in (
        "savings",
        "tiers",
        "compression",
        "runs",
        "tokens",
        "duration-days",
        "durations",
    ):
        assert f'<canvas id="chart-{chart}"' in html
    assert "vendor/chartjs/chart.umd.min.js" in html  # served from static/, no CDN
    # Every script and stylesheet comes from this server: no CDN (a random token in the
    # page may well spell "cdn", so the page's text is not what is checked).
    sources = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', html)
    local = [s for s in sources if s.startswith(("/", "data:")) and not s.startswith("//")]
    assert sources and local == sources, sources


def test_the_metrics_page_counts_failed_retrying_and_cancelled_runs(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Provider down")
    messages_append(conversation=conversation, items=[MessageInput(role="user", content="Hi")])
    for status in ("failed", "cancelled", "failed"):
        ObserverRun.objects.create(
            conversation=conversation, trigger="threshold", status=status, error="provider 503"
        )
    ObserverRun.objects.create(
        conversation=conversation, trigger="threshold", status="retrying", attempts=1
    )
    ReflectorRun.objects.create(conversation=conversation, trigger="manual", status="retrying")

    html = login("viewer").get("/metrics/").content.decode()

    observer = _metrics(html)["observer"]
    assert (observer["failures"], observer["retrying"], observer["cancelled"]) == (2, 1, 1)
    assert "2 failed · 1 retrying" in html
    assert "0 failed · 1 retrying" in html  # the Reflector


def test_metrics_of_one_conversation(login, reflected_conversation, observed_conversation):
    client = login("viewer")
    html = client.get(f"/metrics/?conversation={reflected_conversation.pk}").content.decode()
    data = _metrics(html)
    assert data["scope"]["conversationId"] == str(reflected_conversation.pk)
    assert data["observer"]["total"] == 1 and data["messages"] == 6
    fragment = client.get(
        f"/metrics/?conversation={observed_conversation.pk}", **HX
    ).content.decode()
    assert fragment.lstrip().startswith('<div id="charts">') and "<html" not in fragment
    assert _metrics(fragment)["reflector"]["total"] == 0


def test_metrics_of_another_workspaces_conversation_are_not_found(login, foreign_conversation):
    client = login("admin")
    assert client.get(f"/metrics/?conversation={foreign_conversation.pk}").status_code == 404
    assert client.get("/metrics/?conversation=not-a-uuid").status_code == 404


def test_metrics_with_nothing_to_measure_say_so(login, workspace):
    html = login("viewer").get("/metrics/").content.decode()
    assert "Nothing to measure yet" in html and "metrics-data" not in html
