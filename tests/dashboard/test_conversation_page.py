"""/conversations/<id>/: the three columns, incremental loading, selection by link,
the raw transcript, and the pipeline on demand."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from core.actors import Actor
from governance.redaction.policy import redaction_policy_get_or_create
from memory.models import Conversation, Message, Observation, ObserverRun, Reflection
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_create
from memory.services.pins import pin_create
from tests.dashboard.factories import ROLES
from tests.memory.factories import ObservationFactory, ReflectionFactory

HX = {"HTTP_HX_REQUEST": "true"}


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def _seqs(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'id="m-(\d+)"', html)]


@pytest.mark.parametrize("role", ROLES)
def test_every_role_sees_the_three_columns(login, role, reflected_conversation):
    response = login(role).get(f"/conversations/{reflected_conversation.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    for heading in ("Messages", "Observations", "Reflections"):
        assert f'-heading">{heading}</h2>' in html
    assert "I prefer email over phone calls." in html
    reflection = Reflection.objects.filter(conversation=reflected_conversation).first()
    observation = Observation.objects.filter(conversation=reflected_conversation).first()
    assert escape(reflection.text) in html and escape(observation.text) in html
    editing = ("Observe now", "Reflect now", ">Edit</a>", "Add an observation")
    can_edit = role != "viewer"
    assert all((label in html) is can_edit for label in editing)


def test_another_workspaces_conversation_is_not_found(login, foreign_conversation):
    client = login("admin")
    for url in (
        f"/conversations/{foreign_conversation.pk}/",
        f"/conversations/{foreign_conversation.pk}/transcript",
        f"/conversations/{foreign_conversation.pk}/messages/?before=3",
        f"/conversations/{foreign_conversation.pk}/observations/",
    ):
        response = client.get(url, HTTP_HX_REQUEST="true")
        assert response.status_code == 404, url
    assert client.get("/conversations/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_observations_show_marker_dates_relative_date_and_tokens(login, observed_conversation):
    observation = Observation.objects.filter(conversation=observed_conversation).first()
    observation.referenced_at = timezone.now() + timedelta(days=4)
    observation.priority = "high"
    observation.save()
    html = login("viewer").get(f"/conversations/{observed_conversation.pk}/").content.decode()
    item = html[html.index(f'id="obs-{observation.pk}"') :]
    item = item[: item.index("</li>")]
    # The marker is drawn, and its word is next to it: readable without colour.
    assert '<span class="marker marker-high" aria-hidden="true"></span>high</span>' in item
    assert f'Said <time datetime="{observation.observed_at.isoformat()}' in item
    assert f"written {observation.written_at:%Y-%m-%d %H:%M} UTC" in item
    assert "Event <time" in item and "in 4 days" in item
    assert f"{observation.token_count} tokens" in item
    assert f"Sources #{observation.window_start_seq}" in item


def test_a_long_conversation_shows_the_newest_50_and_loads_older_ones(login, long_conversation):
    client = login("viewer")
    html = client.get(f"/conversations/{long_conversation.pk}/").content.decode()
    assert _seqs(html) == list(range(81, 131))
    assert f'hx-get="/conversations/{long_conversation.pk}/messages/?before=81"' in html
    assert 'href="/conversations/' in html and "?at=31#m-81" in html  # works without JS

    older = client.get(
        f"/conversations/{long_conversation.pk}/messages/?before=81", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _seqs(older) == list(range(31, 81))
    assert "?before=31" in older and "<html" not in older
    oldest = client.get(
        f"/conversations/{long_conversation.pk}/messages/?before=31", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _seqs(oldest) == list(range(1, 31)) and "Load older" not in oldest


def test_newer_messages_load_after_a_jump(login, long_conversation):
    client = login("viewer")
    newer = client.get(
        f"/conversations/{long_conversation.pk}/messages/?after=100", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _seqs(newer) == list(range(101, 131)) and "Load newer" not in newer


def test_jumping_to_an_observation_outside_the_window_marks_its_sources(login, long_conversation):
    observation = Observation.objects.get(conversation=long_conversation, window_start_seq=12)
    client = login("viewer")
    url = f"/conversations/{long_conversation.pk}/messages/?highlight={observation.pk}"
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert _seqs(fragment)[0] == 9  # three messages of context first
    assert re.search(r'id="m-12" class="msg role-assistant is-highlighted"', fragment)
    assert len(re.findall("is-highlighted", fragment)) == 1
    assert "Load older messages" in fragment and "Load newer messages" in fragment

    # Without JavaScript the same link is a whole page with the sources marked.
    redirect = client.get(url)
    assert redirect.status_code == 302
    page = client.get(redirect["Location"]).content.decode()
    assert 'id="m-12" class="msg role-assistant is-highlighted"' in page
    assert f'id="obs-{observation.pk}" class="memory-item obs prio-medium is-selected' in page
    assert "The selected observation (older than those listed below)" in page


def test_a_reflection_link_shows_and_marks_its_observations(login, long_conversation):
    reflection = Reflection.objects.get(conversation=long_conversation)
    client = login("viewer")
    fragment = client.get(
        f"/conversations/{long_conversation.pk}/observations/?reflection={reflection.pk}",
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert fragment.count("memory-item obs") == 10
    assert fragment.count("is-highlighted") == 10
    assert "behind the selected reflection" in fragment and "Show all observations" in fragment
    page = client.get(
        f"/conversations/{long_conversation.pk}/?reflection={reflection.pk}"
    ).content.decode()
    assert f'id="refl-{reflection.pk}" class="memory-item refl prio-medium is-selected"' in page
    assert page.count("is-highlighted") == 10


def test_observations_load_incrementally(login, long_conversation):
    # The first screen shows the newest 8 of the 130; older ones come 50 at a time.
    client = login("viewer")
    page = client.get(f"/conversations/{long_conversation.pk}/").content.decode()
    assert page.count("memory-item obs") == 8
    assert "Note about message 130." in page and "Note about message 122." not in page
    assert "?offset=8#observations" in page  # works without JS
    older = client.get(
        f"/conversations/{long_conversation.pk}/observations/?offset=8", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert older.count("memory-item obs") == 50
    assert "Note about message 122." in older and "Note about message 73." in older
    assert "?offset=58" in older and "<html" not in older
    oldest = client.get(
        f"/conversations/{long_conversation.pk}/observations/?offset=108", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert oldest.count("memory-item obs") == 22
    assert "Note about message 1." in oldest and "Load older observations" not in oldest
    # Without JavaScript the link is the page with that window of observations.
    no_js = client.get(f"/conversations/{long_conversation.pk}/?offset=8").content.decode()
    assert no_js.count("memory-item obs") == 50 and "Note about message 122." in no_js
    assert client.get(f"/conversations/{long_conversation.pk}/observations/").status_code == 302


def test_the_htmx_branch_of_the_page_returns_the_columns(login, observed_conversation):
    html = (
        login("viewer")
        .get(f"/conversations/{observed_conversation.pk}/", HTTP_HX_REQUEST="true")
        .content.decode()
    )
    assert html.lstrip().startswith('<div id="columns"') and "<html" not in html


def _shaped(workspace, messages: int) -> Conversation:
    """A conversation as the pipeline leaves it: one observation per ten messages, all but
    the newest five observed by one run, one reflection per five observations (the older
    ones reflected, a generation each)."""
    conversation = conversation_create(workspace=workspace, title=f"{messages} messages")
    began = timezone.now() - timedelta(days=5)
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=f"Message {seq}.",
            token_count=4,
            created_at=began + timedelta(minutes=seq),
        )
        for seq in range(1, messages + 1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=messages)
    conversation.refresh_from_db()
    ObserverRun.objects.create(
        conversation=conversation,
        trigger="threshold",
        status="succeeded",
        window_start_seq=1,
        window_end_seq=messages - 5,
        tokens_in=4 * (messages - 5),
    )
    observations = [
        ObservationFactory(
            conversation=conversation,
            text=f"Note about messages {start} to {start + 9}.",
            observed_at=began + timedelta(minutes=start + 9),
            window_start_seq=start,
            window_end_seq=start + 9,
        )
        for start in range(1, messages - 4, 10)
    ]
    for generation, start in enumerate(range(0, len(observations) // 2, 5), start=1):
        group = observations[start : start + 5]
        ReflectionFactory(
            conversation=conversation,
            generation=generation,
            text=f"Reflection of generation {generation}.",
            source_observation_ids=[str(o.pk) for o in group],
        )
        Observation.objects.filter(pk__in=[o.pk for o in group]).update(status="reflected")
    return conversation


def _stat(html: str, label: str) -> tuple[str, str]:
    found = re.search(
        rf'stat-label">{label}</span><span class="stat-value">([\d,]+)</span>'
        r'<span class="stat-sub">([\d,]+) tokens',
        html,
    )
    assert found, label
    return found.group(1), found.group(2)


def test_the_page_shows_the_same_windows_for_the_same_queries_whatever_the_size(login, workspace):
    small, large = _shaped(workspace, 400), _shaped(workspace, 2000)
    client = login("viewer")
    client.get("/conversations/")  # the session's workspace is saved on the first request
    for _ in range(2):  # figures counted, then kept
        with CaptureQueriesContext(connection) as small_queries:
            small_page = _page(client, f"/conversations/{small.pk}/")
        with CaptureQueriesContext(connection) as large_queries:
            large_page = _page(client, f"/conversations/{large.pk}/")
        assert len(large_queries) == len(small_queries)
    for page in (small_page, large_page):
        assert len(_seqs(page)) == 50
        assert page.count("memory-item obs") == 8 and page.count("memory-item refl") == 3
        assert "Load older observations" in page and "Load older reflections" in page
    # The figures are counts of everything, not of what is shown.
    assert _stat(large_page, "Messages") == ("2,000", "8,000")
    assert _stat(large_page, "Active observations")[0] == "100"
    assert "100 active · 100 reflected" in large_page


def test_the_figures_follow_new_messages_and_memory_changes(login, workspace):
    conversation = _shaped(workspace, 100)
    client = login("viewer")
    client.get("/conversations/")
    with CaptureQueriesContext(connection) as counted:
        page = _page(client, f"/conversations/{conversation.pk}/")
    assert _stat(page, "Messages") == ("100", "400")
    assert _stat(page, "Active observations")[0] == "5"

    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="One more."),
            MessageInput(role="user", content="And another."),
        ],
    )
    added = sum(
        Message.objects.filter(conversation=conversation, seq__gt=100).values_list(
            "token_count", flat=True
        )
    )
    # Only the new messages are counted: the rest of the figures are kept.
    with CaptureQueriesContext(connection) as appended:
        page = _page(client, f"/conversations/{conversation.pk}/")
    assert _stat(page, "Messages") == ("102", f"{400 + added}")
    assert len(appended) < len(counted)

    observation_create(
        conversation=conversation, actor=Actor(type="api_key", id="9"), text="Agent note"
    )
    page = _page(client, f"/conversations/{conversation.pk}/")
    assert _stat(page, "Active observations")[0] == "6"
    assert _stat(page, "Messages") == ("102", f"{400 + added}")
    assert "6 active · 5 reflected" in page


def test_older_reflections_load_in_pages(login, workspace):
    conversation = _shaped(workspace, 500)  # 5 reflections of the 50 observations
    for generation in range(6, 31):
        ReflectionFactory(
            conversation=conversation, generation=generation, text=f"Reflection {generation}."
        )
    client = login("viewer")
    url = f"/conversations/{conversation.pk}/"
    page = _page(client, url)
    shown = re.findall(r"Reflection (?:of generation )?(\d+)\.", page)
    assert shown == ["28", "29", "30"]
    assert f'hx-get="{url}reflections/?reflection_offset=3"' in page
    assert f'href="{url}?reflection_offset=3#reflections"' in page  # works without JS

    older = client.get(f"{url}reflections/?reflection_offset=3", **HX).content.decode()
    assert re.findall(r"Reflection (?:of generation )?(\d+)\.", older) == [
        str(g) for g in range(8, 28)
    ]
    assert "?reflection_offset=23" in older and "<html" not in older
    oldest = client.get(f"{url}reflections/?reflection_offset=23", **HX).content.decode()
    assert re.findall(r"Reflection (?:of generation )?(\d+)\.", oldest) == [
        str(g) for g in range(1, 8)
    ]
    assert "Load older reflections" not in oldest

    # Without JavaScript: the fragment's address sends to the page, which shows them.
    redirect = client.get(f"{url}reflections/?reflection_offset=3")
    assert redirect.status_code == 302
    assert redirect["Location"] == f"{url}?reflection_offset=3#reflections"
    no_js = _page(client, f"{url}?reflection_offset=3")
    assert no_js.count("memory-item refl") == 20 and "Reflection 27." in no_js


def test_the_page_lists_the_first_pins_and_links_to_all(login, workspace):
    conversation = _shaped(workspace, 30)
    messages = Message.objects.filter(conversation=conversation).order_by("seq")[:25]
    for message in messages:
        pin_create(
            conversation=conversation, actor=Actor(type="api_key", id="9"), message_id=message.pk
        )
    page = _page(login("viewer"), f"/conversations/{conversation.pk}/")
    assert page.count('class="memory-item pin') == 20
    assert "All 25 pins, as the agent is served them" in page
    assert f'href="/conversations/{conversation.pk}/context/#pins-heading"' in page


def test_empty_columns_say_what_happens_next(login, workspace):
    empty = conversation_create(workspace=workspace, title="Nothing yet")
    html = login("reviewer").get(f"/conversations/{empty.pk}/").content.decode()
    assert "No messages yet" in html
    assert "No observations yet. The Observer writes them when unobserved messages pass" in html
    assert "press <em>Observe now</em>" in html
    assert "No reflections yet" in html


# --- raw transcript ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_the_raw_transcript_is_plain_text_for_every_role(login, role, observed_conversation):
    response = login(role).get(f"/conversations/{observed_conversation.pk}/transcript?format=text")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    assert text.startswith(f"Conversation {observed_conversation.pk}\n")
    assert "#3  " in text and "tool (lookup_order)" in text
    assert "I'll drop the parcel off next Tuesday." in text


def test_the_transcript_reads_few_queries_and_escapes_nothing(
    login, workspace, django_assert_max_num_queries
):
    conversation = conversation_create(workspace=workspace, title="<b>x</b>")
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=n,
            role="user",
            content=f"<script>{n}</script>",
            token_count=3,
        )
        for n in range(1, 501)
    )
    client = login("viewer")
    client.get("/conversations/")
    # 7: the page's 5, and the findings and scans that mask each chunk of 2,000 messages
    # (the speakers' names come with the rows).
    with django_assert_max_num_queries(7):
        response = client.get(f"/conversations/{conversation.pk}/transcript")
        page = b"".join(response.streaming_content).decode()
    assert page.count("&lt;script&gt;") == 500 and "<script>" not in page
    assert "<title>Transcript · &lt;b&gt;x&lt;/b&gt; · Memdesk</title>" in page
    assert "default-src 'none'" in response["Content-Security-Policy"]
    text_response = client.get(f"/conversations/{conversation.pk}/transcript?format=text")
    text = b"".join(text_response.streaming_content).decode()
    assert text.count("<script>") == 500  # plain text: shown as written, never run


def test_the_transcript_page_has_a_title_and_wraps_wide_lines(login, observed_conversation):
    response = login("viewer").get(f"/conversations/{observed_conversation.pk}/transcript")
    assert response["Content-Type"] == "text/html; charset=utf-8"
    page = b"".join(response.streaming_content).decode()
    assert "<title>Transcript · Broken headphones · Memdesk</title>" in page
    assert "<h1>Transcript: Broken headphones</h1>" in page
    assert "white-space:pre-wrap" in page and "overflow-wrap:anywhere" in page
    assert "#3  " in page and "I&#x27;ll drop the parcel off next Tuesday." in page


# --- observe and reflect now ----------------------------------------------------------------------


def test_observe_now_queues_a_run_and_the_page_polls_it(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Fresh")
    from tests.dashboard.factories import chat

    chat(conversation)
    client = login("reviewer")
    started = client.post(f"/conversations/{conversation.pk}/observe/", HTTP_HX_REQUEST="true")
    assert started.status_code == 200
    run = ObserverRun.objects.get(conversation=conversation)
    html = started.content.decode()
    assert run.status == "pending" and "waiting for a worker" in html
    poll_url = f"/conversations/{conversation.pk}/runs/observer/{run.pk}/"
    assert f'hx-get="{poll_url}" hx-trigger="every 1s"' in html

    observer_run_execute(run_id=run.pk)  # what the Celery worker does
    done = client.get(poll_url, HTTP_HX_REQUEST="true").content.decode()
    assert "every 1s" not in done  # finished: polling stops
    assert "6 messages →" in done and "Show the new memory" in done
    assert client.get(poll_url).status_code == 302  # without htmx: back to the page


def test_reflect_now_without_htmx_redirects_back_to_the_page(login, observed_conversation):
    response = login("admin").post(f"/conversations/{observed_conversation.pk}/reflect/")
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{observed_conversation.pk}/#runs"
    assert observed_conversation.reflector_runs.count() == 1


def test_a_viewer_cannot_run_the_pipeline_and_is_told_which_role_can(login, observed_conversation):
    response = login("viewer").post(f"/conversations/{observed_conversation.pk}/observe/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "To run the Observer or the Reflector in <strong>acme</strong>" in html
    assert '<strong class="required-role">reviewer</strong>' in html
    assert (
        ObserverRun.objects.filter(conversation=observed_conversation).count() == 1
    )  # the fixture's


def test_run_status_of_another_conversation_is_not_found(
    login, observed_conversation, reflected_conversation
):
    run = ObserverRun.objects.get(conversation=reflected_conversation)
    client = login("viewer")
    url = f"/conversations/{observed_conversation.pk}/runs/observer/{run.pk}/"
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 404
    bad_kind = f"/conversations/{reflected_conversation.pk}/runs/sideways/{run.pk}/"
    assert client.get(bad_kind, HTTP_HX_REQUEST="true").status_code == 404


def test_sources_deleted_by_retention_say_so_instead_of_linking_to_nothing(login, workspace):
    from governance.retention.plan import retention_sweep_request
    from governance.retention.policies import retention_policy_create
    from governance.retention.sweep import retention_sweep
    from tests.governance.builders import ADMIN, conversation_with_tiers

    retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="default",
        message_days=30,
        observation_days=None,
        reflection_days=None,
    )
    conversation = conversation_with_tiers(workspace, old=2, new=2, with_memory=False)
    gone = ObservationFactory(
        conversation=conversation, text="Said long ago.", window_start_seq=1, window_end_seq=2
    )
    kept = ObservationFactory(
        conversation=conversation, text="Said today.", window_start_seq=3, window_end_seq=4
    )
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN, policy=None)
    retention_sweep(sweep_id=sweep.pk)

    html = login("viewer").get(f"/conversations/{conversation.pk}/").content.decode()

    assert "Sources #1–2: no longer stored" in html
    assert f"highlight={gone.pk}#m-1" not in html
    assert (
        f'href="/conversations/{conversation.pk}/?highlight={kept.pk}#m-3">Sources #3–4</a>' in html
    )


# --- the run card: retrying, failed, cancelled, and Cancel -----------------------------------


def _retrying_run(conversation) -> ObserverRun:
    return ObserverRun.objects.create(
        conversation=conversation,
        trigger="threshold",
        status="retrying",
        attempts=2,
        error="provider returned 503",
        next_attempt_at=timezone.now() + timedelta(seconds=30),
    )


def _card(html: str, kind: str = "observer") -> str:
    """The run card of ``kind``: from its div to the next card or the end of the runs."""
    card = html[html.index(f'<div id="run-{kind}"') :]
    ends = [i for i in (card.find('<div id="run-', 1), card.find("</section>")) if i > 0]
    return card[: min(ends)] if ends else card


def test_a_retrying_run_shows_its_attempt_error_and_next_try_and_keeps_polling(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Provider down")
    run = _retrying_run(conversation)

    html = login("viewer").get(f"/conversations/{conversation.pk}/").content.decode()

    card = _card(html)
    assert "retrying: attempt 2 of 6 failed: provider returned 503; next try in " in card
    poll_url = f"/conversations/{conversation.pk}/runs/observer/{run.pk}/"
    assert f'hx-get="{poll_url}" hx-trigger="every 1s"' in card
    assert ">Cancel</button>" not in card  # a viewer may not run the pipeline


def test_a_failed_and_a_cancelled_run_say_so_and_stop_polling(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Gave up")
    ObserverRun.objects.create(
        conversation=conversation,
        trigger="threshold",
        status="failed",
        attempts=6,
        error="circuit open: the provider failed repeatedly",
        finished_at=timezone.now(),
    )
    from memory.models import ReflectorRun

    ReflectorRun.objects.create(
        conversation=conversation, trigger="manual", status="cancelled", finished_at=timezone.now()
    )

    html = login("reviewer").get(f"/conversations/{conversation.pk}/").content.decode()

    observer, reflector = _card(html, "observer"), _card(html, "reflector")
    assert "failed" in observer and "after 6 attempts: circuit open" in observer
    assert "cancelled" in reflector
    assert "every 1s" not in observer + reflector and ">Cancel</button>" not in observer + reflector


def test_a_reviewer_cancels_a_retrying_run_from_its_card(login, workspace):
    from governance.models import AuditEvent

    conversation = conversation_create(workspace=workspace, title="Provider down")
    run = _retrying_run(conversation)
    client = login("reviewer")
    cancel_url = f"/conversations/{conversation.pk}/runs/observer/{run.pk}/cancel/"
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'hx-post="{cancel_url}"' in _card(page) and ">Cancel</button>" in _card(page)

    response = client.post(cancel_url, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    card = response.content.decode()
    assert "cancelled" in card and "last error: provider returned 503" in card
    assert "every 1s" not in card and ">Cancel</button>" not in card
    run.refresh_from_db()
    assert run.status == "cancelled"
    event = AuditEvent.objects.get(action="run.cancel", target_id=str(run.pk))
    assert (event.actor_type, event.actor_role) == ("user", "reviewer")
    # The slot is free: Observe now queues a new run.
    client.post(f"/conversations/{conversation.pk}/observe/", HTTP_HX_REQUEST="true")
    assert ObserverRun.objects.filter(conversation=conversation, status="pending").count() == 1


def test_cancelling_a_run_that_has_finished_says_so(login, observed_conversation):
    run = ObserverRun.objects.get(conversation=observed_conversation)
    cancel_url = f"/conversations/{observed_conversation.pk}/runs/observer/{run.pk}/cancel/"

    card = login("admin").post(cancel_url, HTTP_HX_REQUEST="true").content.decode()

    assert "The run has already succeeded" in card and "✓" in card
    assert ObserverRun.objects.get(pk=run.pk).status == "succeeded"


def test_cancel_without_htmx_redirects_back_to_the_runs(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Provider down")
    run = _retrying_run(conversation)

    response = login("admin").post(
        f"/conversations/{conversation.pk}/runs/observer/{run.pk}/cancel/"
    )

    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{conversation.pk}/#runs"
    assert ObserverRun.objects.get(pk=run.pk).status == "cancelled"


def test_who_may_not_run_the_pipeline_may_not_cancel_and_others_runs_are_not_found(
    login, csrf_client, workspace, foreign_conversation
):
    conversation = conversation_create(workspace=workspace, title="Provider down")
    run = _retrying_run(conversation)
    cancel_url = f"/conversations/{conversation.pk}/runs/observer/{run.pk}/cancel/"

    assert login("viewer").post(cancel_url).status_code == 403
    assert csrf_client("reviewer").post(cancel_url).status_code == 403  # no CSRF token
    theirs = _retrying_run(foreign_conversation)
    foreign_url = f"/conversations/{foreign_conversation.pk}/runs/observer/{theirs.pk}/cancel/"
    assert login("admin").post(foreign_url).status_code == 404
    # Another conversation's run through this conversation's address.
    mixed = f"/conversations/{conversation.pk}/runs/observer/{theirs.pk}/cancel/"
    assert login("admin").post(mixed).status_code == 404
    assert ObserverRun.objects.filter(status="retrying").count() == 2


def test_a_finished_run_reloads_the_columns_and_their_counts(login, workspace):
    from memory.models import PipelineRun
    from memory.pipeline.observer import observer_run_execute
    from memory.services.conversations import conversation_create
    from tests.dashboard.factories import chat

    conversation = conversation_create(workspace=workspace, title="Live")
    chat(conversation)
    run = observer_schedule(conversation=conversation, trigger=PipelineRun.Trigger.MANUAL)
    client = login("reviewer")
    status_url = f"/conversations/{conversation.pk}/runs/observer/{run.pk}/"

    queued = client.get(status_url, HTTP_HX_REQUEST="true")
    assert "run-finished" not in queued.get("HX-Trigger", "")

    observer_run_execute(run_id=run.pk)
    finished = client.get(status_url, HTTP_HX_REQUEST="true")
    assert "run-finished" in finished["HX-Trigger"]

    reloaded = client.get(f"/conversations/{conversation.pk}/observations/", HTTP_HX_REQUEST="true")
    html = reloaded.content.decode()
    active = conversation.observations.filter(status="active").count()
    assert active > 0
    assert 'id="observation-counts"' in html and 'hx-swap-oob="true"' in html
    assert f"{active} active" in html


def test_messages_not_observed_yet_are_marked_on_the_conversation_page(
    login, observed_conversation
):
    messages_append(
        conversation=observed_conversation,
        items=[MessageInput(role="user", content="Still there?")],
    )
    html = _page(login("viewer"), f"/conversations/{observed_conversation.pk}/")
    newest = html[html.index('id="m-7"') :]
    newest = newest[: newest.index("</li>")]
    assert "is-unobserved" in newest and "not observed yet" in newest
    first = html[html.index('id="m-1"') :]
    assert "not observed yet" not in first[: first.index("</li>")]
    assert f'href="/conversations/{observed_conversation.pk}/context/"' in html


def test_priorities_have_a_legend_and_a_filter_that_works_without_javascript(
    login, observed_conversation
):
    priorities = dict(
        Observation.objects.filter(conversation=observed_conversation).values_list("pk", "priority")
    )
    high = [pk for pk, p in priorities.items() if p == "high"]
    assert high and len(high) < len(priorities)
    client = login("viewer")
    html = _page(client, f"/conversations/{observed_conversation.pk}/")
    legend = html[html.index('class="priority-filter"') :]
    legend = legend[: legend.index("</form>")]
    for word in ("high", "medium", "low", "completed"):
        assert f'<input type="radio" name="priority" value="{word}"' in legend
        assert f'aria-hidden="true"></span>{word}' in legend

    filtered = _page(client, f"/conversations/{observed_conversation.pk}/?priority=high")
    assert filtered.count('class="memory-item obs ') == len(high)
    assert 'value="high" checked' in filtered
    partial = client.get(
        f"/conversations/{observed_conversation.pk}/observations/?priority=high", **HX
    ).content.decode()
    assert partial.count('class="memory-item obs ') == len(high)
    redirected = client.get(
        f"/conversations/{observed_conversation.pk}/observations/?priority=high"
    )
    assert redirected["Location"].endswith("?priority=high#observations")
    # An unknown priority filters nothing.
    everything = _page(client, f"/conversations/{observed_conversation.pk}/?priority=urgent")
    assert everything.count('class="memory-item obs ') == len(priorities)


def test_a_manual_observation_says_who_wrote_it(login, observed_conversation):
    client = login("reviewer")
    response = client.post(
        f"/conversations/{observed_conversation.pk}/observations/add/",
        {"text": "Call back on Monday", "priority": "high", "reason": "phone call"},
    )
    assert response.status_code == 302
    observation = Observation.objects.get(
        conversation=observed_conversation, text="Call back on Monday"
    )
    html = _page(login("viewer"), f"/conversations/{observed_conversation.pk}/")
    item = html[html.index(f'id="obs-{observation.pk}"') :]
    assert f"written by {client.user.username}" in item[: item.index("</li>")]
    added = client.post(
        f"/conversations/{observed_conversation.pk}/observations/add/",
        {"text": "Another note", "priority": "low", "reason": "r"},
        **HX,
    )
    assert f"written by {client.user.username}" in added.content.decode()


def test_an_observation_by_an_agent_is_not_called_a_person(login, observed_conversation):
    observation_create(
        conversation=observed_conversation, actor=Actor(type="api_key", id="9"), text="Agent note"
    )
    html = _page(login("viewer"), f"/conversations/{observed_conversation.pk}/")
    item = html[html.index(">Agent note<") :]
    assert "written by an agent" in item[: item.index("</li>")]
    assert "a person" not in item[: item.index("</li>")]


def test_every_item_is_a_tab_stop_and_the_shortcuts_are_on_the_page(login, reflected_conversation):
    html = _page(login("viewer"), f"/conversations/{reflected_conversation.pk}/")
    assert 'Jump to: <a href="#messages"' in html
    assert 'href="#observations"' in html and 'href="#reflections"' in html
    assert "Keyboard shortcuts" in html and "<kbd>j</kbd>" in html
    messages = html.count('class="msg role-')
    assert messages and html.count('data-message-id="') == messages
    for marker in ('class="msg role-', 'class="memory-item obs ', 'class="memory-item refl '):
        for chunk in html.split(marker)[1:]:
            assert 'tabindex="0"' in chunk[: chunk.index(">")]


def test_the_add_bar_sits_above_the_list_not_over_it(login, observed_conversation):
    html = _page(login("reviewer"), f"/conversations/{observed_conversation.pk}/")
    bar = html.index('class="add-observation"')
    assert bar < html.index('id="observation-list"')
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static/css/memdesk.css").read_text()
    assert ".add-observation[open] + .column-body" in css


def test_a_named_speaker_is_shown_beside_the_role_masked_as_the_text_masks_people(login, workspace):
    """The policy redacts people: a speaker's name is masked on the page and in the
    transcript as a person in a message is (a viewer learns that a person spoke, in which
    role, not who); a name the policy allows stays, and an unnamed one shows as before."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    policy.allow_list = ["Support Team"]
    policy.save()
    conversation = conversation_create(workspace=workspace, title="Hand-over")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="My parcel is late.", name="Maria <Lopez>"),
            MessageInput(role="assistant", content="Let me check.", name="Tom Berg (agent)"),
            MessageInput(role="assistant", content="Anything else?"),
            MessageInput(role="assistant", content="Closing the case.", name="Support Team"),
            MessageInput(role="user", content="Thanks.", name="Carl (Maria's son)"),
        ],
    )
    client = login("viewer")

    html = _page(client, f"/conversations/{conversation.pk}/")
    page = b"".join(client.get(f"/conversations/{conversation.pk}/transcript").streaming_content)

    assert (
        '<strong class="speaker">&lt;PERSON&gt;</strong> <span class="role">(user)</span>' in html
    )
    assert 'aria-label="Message 2, &lt;PERSON&gt; (agent) (assistant)' in html
    assert '<strong class="role">assistant</strong>' in html  # message 3, as before
    assert 'aria-label="Message 3, assistant' in html
    assert '<strong class="speaker">Support Team</strong>' in html  # allowed by the policy
    transcript = page.decode()
    for shown in (html, transcript):
        assert "Lopez" not in shown and "Tom Berg" not in shown
        # a qualifier names no one: "Maria" of "(Maria's son)" is masked too
        assert "Maria" not in shown and "Carl" not in shown
        assert "&lt;PERSON&gt; (&lt;PERSON&gt;&#x27;s son)" in shown
    assert "&lt;PERSON&gt; (user)" in transcript
    assert re.search(r"#2  \S+ \S+  &lt;PERSON&gt; \(agent\) \(assistant\)", transcript)
    assert re.search(r"#3  \S+ \S+  assistant(  \[|\n)", transcript)


def test_a_speaker_s_name_is_shown_as_written_where_the_policy_does_not_redact_people(
    login, workspace
):
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    policy.entities = ["EMAIL_ADDRESS"]
    policy.save()
    conversation = conversation_create(workspace=workspace, title="Hand-over")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="My parcel is late.", name="Maria Lopez")],
    )

    html = _page(login("viewer"), f"/conversations/{conversation.pk}/")

    assert '<strong class="speaker">Maria Lopez</strong>' in html
