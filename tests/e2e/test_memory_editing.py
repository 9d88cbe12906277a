"""Correcting memory in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
an edit with a reason, its revert and the history; a corrected observation's reflection
going stale and re-derived; adding an observation inline."""

from __future__ import annotations

from playwright.sync_api import expect

from memory.models import Observation, Reflection, ReflectorRun
from memory.pipeline.reflector import reflector_run_execute
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in


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
    reflector_run_execute(run_id=run.pk)  # the worker's part
    # While one is stale the column polls: the re-derivation shows without a reload.
    page.wait_for_selector(f"#refl-{reflection.pk} >> text=superseded")
    # A person's words are not condensed again: the observation is served as written,
    # no longer in place of a reflection.
    corrected = page.locator(f"#obs-{note.pk}")
    expect(corrected).not_to_contain_text("served while")
    expect(corrected.locator(".item-text")).to_have_text("User prefers SMS over phone calls.")
    assert "a person's words" in corrected.inner_text()
    assert "reflected" not in corrected.locator(".item-head").inner_text()
    page.locator(f"#refl-{reflection.pk}").scroll_into_view_if_needed()
    screenshot(page, "12-reflection-rederived")
    assert not Reflection.objects.filter(status="active", text__contains="SMS").exists()


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
