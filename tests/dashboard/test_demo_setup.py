"""`make run`'s demo: the admin has a role and the dashboard has all three tiers."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from memory.models import (
    Conversation,
    Message,
    Observation,
    ObserverRun,
    Reflection,
    ReflectorRun,
)
from tenancy.models import Membership


def test_demo_setup_gives_the_admin_a_role_and_runs_the_pipeline_once(db, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("demo_setup", stdout=StringIO())
    membership = Membership.objects.get(user__username="admin", workspace__name="demo")
    assert membership.role == "admin"
    conversations = list(Conversation.objects.order_by("created_at", "id"))
    observed = [c for c in conversations if c.observer_runs.exists()]
    reflected = [c for c in conversations if c.reflector_runs.exists()]
    assert len(observed) == 4 and len(reflected) == 2  # two thirds observed, one third reflected
    assert Reflection.objects.exists() and Observation.objects.filter(status="active").exists()
    raw = [c for c in conversations if c not in observed]
    assert raw and not Observation.objects.filter(conversation__in=raw).exists()

    counts = (
        ObserverRun.objects.count(),
        ReflectorRun.objects.count(),
        Observation.objects.count(),
    )
    second = StringIO()
    call_command("demo_setup", stdout=second)
    assert (
        ObserverRun.objects.count(),
        ReflectorRun.objects.count(),
        Observation.objects.count(),
    ) == counts
    assert Membership.objects.count() == 1
    assert "Pipeline" not in second.getvalue()

    client = Client()
    password = (tmp_path / "admin_password").read_text().strip()
    assert (
        client.post("/accounts/login/", {"username": "admin", "password": password}).status_code
        == 302
    )
    page = client.get(f"/conversations/{reflected[0].pk}/").content.decode()
    assert 'class="memory-item refl' in page and 'class="memory-item obs' in page


def test_demo_setup_is_safe_to_run_twice(db, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    first, second = StringIO(), StringIO()
    call_command("demo_setup", "--port", "8123", stdout=first)
    counts = (Conversation.objects.count(), Message.objects.count())
    call_command("demo_setup", "--port", "8123", stdout=second)
    assert (Conversation.objects.count(), Message.objects.count()) == counts
    assert counts[0] >= 5 and Message.objects.filter(role="tool").exists()
    key_line = next(line for line in first.getvalue().splitlines() if "API key" in line)
    assert key_line in second.getvalue()  # the same key is printed again
    assert "http://127.0.0.1:8123/" in second.getvalue()
    raw_key = key_line.split()[2]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert len(client.get("/v1/conversations").json()["conversations"]) == counts[0]
