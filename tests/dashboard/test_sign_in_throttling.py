"""Signing in is throttled by account and by address (django-axes): after
``AXES_FAILURE_LIMIT`` wrong passwords even the right one is refused until the cool-off
has passed, with a page that says when to try again. Failures are logged without the
password and a lockout is audited in the account's workspaces.

The test settings turn the throttle off (Django's test client signs in without a
request, which axes refuses); every test here turns it on."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.db.models import F
from django.test import Client

from governance.models import AuditEvent
from tests.dashboard.factories import PASSWORD, MembershipFactory, UserFactory

CLIENT = "203.0.113.7"
ELSEWHERE = "198.51.100.9"
PROXY = "10.0.0.2"
WRONG = "hunter2-wrong"


@pytest.fixture(autouse=True)
def login_throttling(settings) -> None:
    settings.AXES_ENABLED = True


def _sign_in(username: str, password: str, *, address: str = CLIENT, **extra: str):
    path = extra.pop("path", "/accounts/login/")
    return Client().post(
        path, {"username": username, "password": password}, REMOTE_ADDR=address, **extra
    )


def _fail_until_locked(username: str, settings, **extra: str) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _sign_in(username, WRONG, **extra).status_code == 200  # the form, with its error
    assert _sign_in(username, WRONG, **extra).status_code == 429


def _signed_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


def test_the_right_password_is_refused_once_an_account_is_locked_and_the_page_says_until_when(
    member, settings
):
    user = member("viewer")
    _fail_until_locked(user.username, settings)

    response = _sign_in(user.username, PASSWORD)

    assert response.status_code == 429
    assert "_auth_user_id" not in response.client.session
    page = response.content.decode()
    assert "Too many failed sign-ins" in page
    last_failure = AccessAttempt.objects.latest("attempt_time").attempt_time
    until = last_failure + timedelta(minutes=settings.MEMDESK_LOGIN_COOLOFF_MINUTES)
    shown = until.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert f"Try again after {shown:%H:%M} UTC" in page
    assert 0 < int(response["Retry-After"]) <= settings.MEMDESK_LOGIN_COOLOFF_MINUTES * 60
    assert '<link rel="stylesheet"' in page  # the product's page, not a bare line of text
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_a_locked_account_is_locked_from_every_address(member, settings):
    user = member("viewer")
    _fail_until_locked(user.username, settings)

    assert _sign_in(user.username, PASSWORD, address=ELSEWHERE).status_code == 429


def test_an_address_that_guessed_too_often_is_locked_for_every_account(member, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(f"guess{n}", WRONG)
    user = member("viewer")

    assert _sign_in(user.username, PASSWORD).status_code == 429
    # A header a client sends itself is not its address (no proxy is configured).
    assert _sign_in(user.username, PASSWORD, HTTP_X_FORWARDED_FOR=ELSEWHERE).status_code == 429
    assert _signed_in(_sign_in(user.username, PASSWORD, address=ELSEWHERE))


def test_the_lock_lifts_once_the_cool_off_has_passed(member, settings):
    user = member("viewer")
    _fail_until_locked(user.username, settings)
    cool_off = timedelta(minutes=settings.MEMDESK_LOGIN_COOLOFF_MINUTES, seconds=1)
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - cool_off)

    assert _signed_in(_sign_in(user.username, PASSWORD))


def test_behind_the_proxy_each_client_is_throttled_by_its_own_address(member, settings):
    settings.MEMDESK_PROXY_COUNT = 1
    for n in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(f"guess{n}", WRONG, address=PROXY, HTTP_X_FORWARDED_FOR=CLIENT)
    user = member("viewer")

    # Another person behind the same proxy signs in.
    assert _signed_in(
        _sign_in(user.username, PASSWORD, address=PROXY, HTTP_X_FORWARDED_FOR=ELSEWHERE)
    )
    # The locked client cannot get out by putting another address before the proxy's.
    spoofed = f"{ELSEWHERE}, {CLIENT}"
    response = _sign_in(user.username, PASSWORD, address=PROXY, HTTP_X_FORWARDED_FOR=spoofed)
    assert response.status_code == 429
    assert AccessAttempt.objects.filter(ip_address=PROXY).count() == 0


def test_the_admin_sign_in_is_throttled_too(db, settings):
    staff = UserFactory(is_staff=True, is_superuser=True)
    _fail_until_locked(staff.username, settings, path="/admin/login/")

    response = _sign_in(staff.username, PASSWORD, path="/admin/login/")

    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in response.client.session


def test_a_lockout_is_audited_once_in_each_workspace_of_the_account(
    member, workspace, other_workspace, settings
):
    user = member("viewer")
    MembershipFactory(user=user, workspace=other_workspace, role="admin")
    # Each guess from another address: the account is locked, no address is.
    for n in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(user.username, WRONG, address=f"192.0.2.{n}")
    _sign_in(user.username, WRONG)  # refused while locked: not a second lockout
    _sign_in(user.username, PASSWORD)

    events = AuditEvent.objects.filter(action="user.lockout").order_by("workspace__name")
    assert [e.workspace_id for e in events] == [workspace.pk, other_workspace.pk]
    for event in events:
        assert (event.target_type, event.target_id) == ("user", str(user.pk))
        assert event.ip_address == f"192.0.2.{settings.AXES_FAILURE_LIMIT - 1}"
        assert event.after["lockedBy"] == ["account"]
        assert event.after["failures"] == settings.AXES_FAILURE_LIMIT
        assert event.after["lockedUntil"]
        assert WRONG not in json.dumps([event.before, event.after, event.reason])


def test_an_address_lockout_is_audited_for_the_account_it_was_guessing(member, settings):
    user = member("viewer")
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        _sign_in(f"guess{n}", WRONG)
    _sign_in(user.username, WRONG)

    [event] = AuditEvent.objects.filter(action="user.lockout")
    assert event.target_id == str(user.pk)
    assert event.after["lockedBy"] == ["address"]


def test_failures_and_lockouts_are_logged_without_the_password_name_or_address(
    member, settings, caplog
):
    user = member("viewer")
    with caplog.at_level("INFO"):
        _fail_until_locked(user.username, settings)
        for n in range(settings.AXES_FAILURE_LIMIT):
            _sign_in(f"nobody{n}", WRONG, address=ELSEWHERE)

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "login failure" in logged
    assert f"sign-in locked for account {user.pk}" in logged
    assert "sign-in locked for an address" in logged
    for secret in (WRONG, user.username, "nobody0", CLIENT, ELSEWHERE):
        assert secret not in logged
    stored = AccessAttempt.objects.values_list("post_data", "get_data")
    assert all(WRONG not in post and WRONG not in get for post, get in stored)


def test_an_admin_unlocks_an_account_with_axes_reset_username(member, settings):
    user = member("viewer")
    _fail_until_locked(user.username, settings)

    call_command("axes_reset_username", user.username)

    assert _signed_in(_sign_in(user.username, PASSWORD))
