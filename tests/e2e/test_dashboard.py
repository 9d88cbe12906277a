"""The dashboard in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright)
against pytest-django's live server: sign-in per role, selection highlighting, inline
editing with history and revert, the run's progress, charts, and links without
JavaScript. Each page is saved as a screenshot (the folder is printed at the end)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from core.actors import SYSTEM_ACTOR
from memory import pipeline
from memory.models import Observation, ObserverRun, Reflection, ReflectorRun
from memory.services import conversation_create, escalation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_each_role_signs_in_and_sees_what_it_may_do(open_page, member, role, screenshot, workspace):
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    page = open_page()
    if role == "viewer":
        page.goto("/accounts/login/")
        screenshot(page, "01-sign-in")
    sign_in(page, member(role))
    assert page.locator(".role-badge").inner_text() == {"compliance": "compliance officer"}.get(
        role, role
    )
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="API keys").count() == (1 if role == "admin" else 0)
    screenshot(page, f"02-conversations-{role}")
    page.get_by_role("link", name="Broken headphones").click()
    for heading in ("Messages", "Observations", "Reflections"):
        # expect() waits for the navigation the click started; is_visible() would not.
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    can_edit = role != "viewer"
    assert (page.get_by_role("button", name="Observe now").count() == 1) is can_edit
    if role == "viewer":
        page.goto("/settings/api-keys/")
        assert "you need the admin role" in page.locator("main").inner_text()
        screenshot(page, "09-forbidden-viewer")


def test_selecting_memory_highlights_its_sources_even_when_not_loaded(
    open_page, member, long_conversation, screenshot
):
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{long_conversation.pk}/")
    assert page.locator("#m-130").is_visible()  # the newest messages, scrolled into view
    assert page.locator("#m-80").count() == 0  # older ones not loaded yet

    # Sources inside the window: marked in place.
    newest = Observation.objects.get(conversation=long_conversation, window_start_seq=125)
    page.locator(f"#obs-{newest.pk} .item-text").click()
    page.wait_for_selector("#m-125.is-highlighted")
    assert page.locator(".msg.is-highlighted").count() == 1
    assert "1 source message highlighted." in page.locator("#selection-status").inner_text()

    # Older observations load on demand; their sources are outside the message window,
    # so they are fetched, then marked and scrolled to.
    page.get_by_role("link", name="Load older observations").click()
    older = Observation.objects.get(conversation=long_conversation, window_start_seq=40)
    page.locator(f"#obs-{older.pk} .sources-link").click()
    page.wait_for_selector("#m-40.is-highlighted")
    assert page.locator("#m-40").is_visible()
    assert page.locator(f"#obs-{older.pk}.is-selected").count() == 1
    screenshot(page, "03-observation-selected")

    # A reflection over observations not loaded: they are fetched and marked.
    reflection = Reflection.objects.get(conversation=long_conversation)
    page.locator(f"#refl-{reflection.pk} .item-text").click()
    page.wait_for_selector("#observation-list .is-highlighted")
    assert page.locator("#observation-list .memory-item.is-highlighted").count() == 10
    assert page.get_by_text("behind the selected reflection").is_visible()
    screenshot(page, "04-reflection-selected")

    # Loading older messages keeps working after the jump.
    page.get_by_role("link", name="Load older messages").click()
    page.wait_for_selector("#m-1")


def test_a_reflection_highlights_loaded_observations_in_place(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, user_id="t", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    reflection = Reflection.objects.filter(conversation=conversation).first()
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.locator(f"#refl-{reflection.pk} .item-text").click()
    for observation_id in reflection.source_observation_ids:
        page.wait_for_selector(f"#obs-{observation_id}.is-highlighted")
    assert page.get_by_text("behind the selected reflection").count() == 0  # no fetch needed


def test_edit_with_a_reason_then_revert_and_see_both_in_the_history(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    observation = Observation.objects.filter(conversation=conversation).order_by("observed_at")[0]
    original = observation.text
    page = open_page()
    sign_in(page, member("reviewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    item = page.locator(f"#obs-{observation.pk}")

    item.get_by_role("link", name="Edit").click()
    text = item.get_by_label("Text")
    text.fill("Dana's headphones are broken; refund agreed.")
    item.get_by_role("button", name="Save").click()
    item.locator(".errorlist").wait_for()
    assert "Give a reason" in item.locator(".errorlist").inner_text()  # under the field
    screenshot(page, "05-edit-needs-a-reason")
    item.get_by_label("Reason").fill("summarise the outcome")
    item.get_by_role("button", name="Save").click()
    page.wait_for_selector(f"#obs-{observation.pk} .item-text >> text=refund agreed")
    assert "v2" in item.locator(".item-head").inner_text()

    item.get_by_role("link", name="History").click()
    history = item.locator(".history")
    history.wait_for()
    assert "v1 → v2" in history.inner_text() and "summarise the outcome" in history.inner_text()
    history.get_by_label("Reason").fill("the edit dropped the order number")
    history.get_by_role("button", name="Revert to v1").click()
    page.wait_for_selector(f"#obs-{observation.pk} .history >> text=v2 → v3")
    assert item.locator(".item-text").inner_text() == original
    text_of_history = item.locator(".history").inner_text()
    assert "summarise the outcome" in text_of_history
    assert "the edit dropped the order number" in text_of_history
    assert "revert" in text_of_history and "edit" in text_of_history
    screenshot(page, "06-history-after-revert")
    observation.refresh_from_db()
    assert (observation.text, observation.version) == (original, 3)


def test_a_corrected_observation_s_reflection_goes_stale_then_is_rederived(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    note = Observation.objects.get(conversation=conversation, text__contains="email")
    [reflection] = [
        r
        for r in Reflection.objects.filter(conversation=conversation)
        if str(note.pk) in r.source_observation_ids
    ]
    page = open_page()
    sign_in(page, member("reviewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    item = page.locator(f"#obs-{note.pk}")
    item.get_by_role("link", name="Edit").click()
    item.get_by_label("Text").fill("User prefers SMS over phone calls.")
    item.get_by_label("Reason").fill("the customer wrote again")
    item.get_by_role("button", name="Save").click()

    # The reflections column reloads by itself: the reflection is no longer served.
    page.wait_for_selector(f"#refl-{reflection.pk} >> text=stale, being re-derived")
    assert "served while its reflection is re-derived" in item.inner_text()
    page.locator(f"#refl-{reflection.pk}").scroll_into_view_if_needed()
    screenshot(page, "11-reflection-stale")

    run = ReflectorRun.objects.get(conversation=conversation, status="pending")
    pipeline.reflector_run_execute(run_id=run.pk)  # the worker's part
    # While one is stale the column polls: the new reflection appears without a reload.
    page.wait_for_selector("#reflection-list >> text=User prefers SMS over phone calls")
    assert "superseded" in page.locator(f"#refl-{reflection.pk}").inner_text()
    # ... and the observation it stood in for is no longer served in its place.
    page.wait_for_selector(f"#obs-{note.pk} .badge >> text=reflected")
    assert "served while" not in page.locator(f"#obs-{note.pk}").inner_text()
    page.locator(f"#refl-{reflection.pk}").scroll_into_view_if_needed()
    screenshot(page, "12-reflection-rederived")

    successor = Reflection.objects.get(status="active", text__contains="SMS")
    new = page.locator(f"#refl-{successor.pk}")
    new.get_by_role("link", name="Edit").click()
    new.get_by_label("Text").fill("Customer wants texts, never calls.")
    new.get_by_label("Reason").fill("clearer")
    new.get_by_role("button", name="Save").click()
    page.wait_for_selector(f"#refl-{successor.pk} .item-text >> text=never calls")
    successor.refresh_from_db()
    assert (successor.text, successor.version) == ("Customer wants texts, never calls.", 2)


def test_adding_an_observation_inline(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, title="Quiet")
    chat(conversation)
    page = open_page()
    sign_in(page, member("reviewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    assert page.get_by_text("No observations yet").is_visible()
    page.get_by_text("Add an observation").click()
    form = page.locator("#add-observation-form")
    form.get_by_label("Text").fill("Customer prefers email.")
    form.get_by_label("Reason").fill("said so on the phone")
    form.get_by_role("button", name="Add observation").click()
    page.wait_for_selector("#observation-list .memory-item >> text=Customer prefers email.")
    assert page.get_by_text("No observations yet").is_hidden()


def test_observe_now_shows_the_runs_progress(open_page, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, title="Unobserved")
    chat(conversation)
    page = open_page()
    sign_in(page, member("reviewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.get_by_role("button", name="Observe now").click()
    page.wait_for_selector("#run-observer >> text=waiting for a worker")
    screenshot(page, "07-run-queued")
    run = ObserverRun.objects.get(conversation=conversation)
    assert page.locator("#observation-list .memory-item").count() == 0
    url = page.url
    pipeline.observer_run_execute(run_id=run.pk)  # the worker's part
    page.wait_for_selector("#run-observer >> text=Show the new memory")
    # The columns update on their own, without a reload: the new observations and the
    # column's counts.
    page.wait_for_selector("#observation-list .memory-item")
    stored = Observation.objects.filter(conversation=conversation).count()
    assert page.locator("#observation-list .memory-item").count() == stored
    assert f"{stored} active" in page.locator("#observation-counts").inner_text()
    assert page.url == url


def test_the_metrics_charts_draw(open_page, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, title="Measured")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Wants a person")
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto("/metrics/")
    page.wait_for_function("window.memdeskCharts && window.memdeskCharts.length === 8")
    painted = page.evaluate(
        """() => [...document.querySelectorAll('canvas')].map(canvas => {
            const context = canvas.getContext('2d');
            const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
            let count = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) count++;
            return count;
        })"""
    )
    assert len(painted) == 8 and all(pixels > 0 for pixels in painted)
    screenshot(page, "08-metrics")
    page.locator("#scope").select_option(str(conversation.pk))
    page.wait_for_selector("#charts >> text=One conversation")
    page.wait_for_function("window.memdeskCharts && window.memdeskCharts.length === 8")


def test_a_reviewer_resolves_an_escalation_from_the_list(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, title="Refund call")
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Asks for a manager")
    page = open_page()
    sign_in(page, member("reviewer"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Escalations").click()
    expect(page.get_by_text("Asks for a manager")).to_be_visible()
    page.get_by_label("What was done").fill("Called back, refund approved")
    page.get_by_role("button", name="Resolve").click()
    page.wait_for_selector("text=Escalation resolved.")
    assert page.get_by_text("No open escalations.").is_visible()
    page.get_by_role("link", name="Resolved").click()
    page.get_by_role("link", name="Refund call").click()
    assert "Called back, refund approved" in page.locator("#escalations").inner_text()


def test_an_admin_creates_a_key_and_sees_it_once(open_page, member, screenshot):
    page = open_page()
    sign_in(page, member("admin"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("support bot")
    page.get_by_role("button", name="Create key").click()
    raw_key = page.locator("#raw-key").input_value()
    assert raw_key.startswith("md_")
    screenshot(page, "10-api-key-created")
    page.reload()
    assert raw_key not in page.content()


def test_links_work_without_javascript(open_page, member, long_conversation):
    page = open_page(javascript=False)
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{long_conversation.pk}/")
    page.get_by_role("link", name="Load older messages").click()
    page.wait_for_url("**?at=31*")
    assert page.locator("#m-31").count() == 1 and page.locator("#m-130").count() == 0
    page.goto(f"/conversations/{long_conversation.pk}/")
    page.get_by_role("link", name="Load older observations").click()
    page.wait_for_url("**?offset=50*")
    older = Observation.objects.get(conversation=long_conversation, window_start_seq=40)
    page.locator(f"#obs-{older.pk} .sources-link").click()
    page.wait_for_selector("#m-40.is-highlighted")
    assert page.locator(f"#obs-{older.pk}.is-selected").count() == 1
