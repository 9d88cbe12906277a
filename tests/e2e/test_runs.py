"""Running the pipeline on demand in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): observe now shows the run's progress."""

from __future__ import annotations

from memory.models import Observation, ObserverRun
from memory.pipeline.observer import observer_run_execute
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat
from tests.e2e.browser import sign_in


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
    observer_run_execute(run_id=run.pk)  # the worker's part
    page.wait_for_selector("#run-observer >> text=Show the new memory")
    # The columns update on their own, without a reload: the new observations and the
    # column's counts.
    page.wait_for_selector("#observation-list .memory-item")
    stored = Observation.objects.filter(conversation=conversation).count()
    assert page.locator("#observation-list .memory-item").count() == stored
    assert f"{stored} active" in page.locator("#observation-counts").inner_text()
    assert page.url == url
