"""Sign-in throttling on top of django-axes (config/settings/base.py, "Sign-in
throttling"): the client's address behind the proxy, the lockout page that says when to
try again, and the audit event of a lockout.

axes counts failures by account name and by address apart and refuses either once it
has ``AXES_FAILURE_LIMIT`` failures younger than the cool-off; these functions are the
hooks its settings name (``AXES_CLIENT_IP_CALLABLE``, ``AXES_LOCKOUT_CALLABLE``) and the
receiver of its ``user_locked_out`` signal (dashboard/apps.py)."""

from __future__ import annotations

import ipaddress
import logging
import math
from datetime import datetime, timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler  # type: ignore[import-untyped]
from axes.helpers import (  # type: ignore[import-untyped]
    get_cool_off,
    get_failure_limit,
    get_lockout_parameters,
)
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from core.actors import SYSTEM_ROLE, Actor, ActorType
from core.request_ids import request_id_of
from dashboard.selectors.users import workspaces_for_user
from governance.audit.writer import audit_record

logger = logging.getLogger(__name__)

# What each of axes' lockout parameters locks, as the audit trail and the logs name it.
LOCKED_BY = {"username": "account", "ip_address": "address"}
THROTTLE_ACTOR_ID = "login-throttle"


def client_address(request: HttpRequest) -> str | None:
    """The address sign-ins are counted by: the connection's own, or behind
    ``MEMDESK_PROXY_COUNT`` proxies the one the outermost proxy added to
    X-Forwarded-For. Entries before it are the client's own word and are never read, so
    a client cannot leave its lock by sending the header."""
    remote = request.META.get("REMOTE_ADDR") or None
    hops = settings.MEMDESK_PROXY_COUNT
    if not hops:
        return remote
    forwarded = [
        entry.strip()
        for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if entry.strip()
    ]
    if len(forwarded) < hops:  # not through every proxy: the header is not the proxies'
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-hops]))
    except ValueError:
        return remote


def lock_ends(request: HttpRequest, credentials: dict[str, Any] | None) -> dict[str, datetime]:
    """When each lock on this sign-in lifts, by what it locks ("account", "address"):
    once enough of the failures counted against it are older than the cool-off to leave
    fewer than the limit. Empty when nothing is locked."""
    limit = get_failure_limit(request, credentials)
    cool_off: timedelta = get_cool_off(request)
    attempts_by_parameter = AxesProxyHandler.get_implementation().get_user_attempts(
        request, credentials
    )
    ends = {}
    for parameter, attempts in zip(
        get_lockout_parameters(request, credentials), attempts_by_parameter, strict=True
    ):
        failures = 0
        for attempt_time, count in attempts.order_by("-attempt_time").values_list(
            "attempt_time", "failures_since_start"
        ):
            failures += count
            if failures >= limit:
                ends[LOCKED_BY[parameter]] = attempt_time + cool_off
                break
    return ends


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None,
    credentials: dict[str, Any] | None,
) -> HttpResponse:
    """429 with the product's page: sign-in is paused, and until when (to the next full
    minute, so that trying at the time shown works), also as Retry-After."""
    now = timezone.now()
    until = max(lock_ends(request, credentials).values(), default=now + get_cool_off(request))
    response = render(
        request,
        "registration/locked_out.html",
        {
            "try_again_at": until.replace(second=0, microsecond=0) + timedelta(minutes=1),
            "failure_limit": get_failure_limit(request, credentials),
        },
        status=429,
    )
    response["Retry-After"] = str(max(1, math.ceil((until - now).total_seconds())))
    return response


def lockout_audit(
    sender: object, *, request: HttpRequest, username: str | None, ip_address: str | None, **_: Any
) -> None:
    """Record the sign-in that caused a lockout: one ``user.lockout`` event in every
    workspace the account named can open (as /admin/ records a change to an account),
    from the address that tried. A name no account has reaches no workspace: that
    lockout is only logged. The log names the account by id and never the name tried,
    the address or the password."""
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None:  # refused while already locked: recorded when the lock began
        return
    credentials = getattr(request, "axes_credentials", None)
    ends = lock_ends(request, credentials)
    until = max(ends.values(), default=timezone.now())
    locked_by = sorted(ends)
    user_model = get_user_model()
    account = (
        user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
        if username
        else None
    )
    if account is None:
        logger.warning(
            "sign-in locked for %s after %s failures until %s; no account has the name tried",
            " and ".join({"account": "a name", "address": "an address"}[w] for w in locked_by),
            failures,
            f"{until:%H:%M:%S} UTC",
        )
        return
    logger.warning(
        "sign-in locked for account %s (by %s) after %s failures until %s",
        account.pk,
        " and ".join(locked_by),
        failures,
        f"{until:%H:%M:%S} UTC",
    )
    actor = Actor(
        type=ActorType.SYSTEM,
        id=THROTTLE_ACTOR_ID,
        role=SYSTEM_ROLE,
        request_id=request_id_of(request),
        ip_address=ip_address,
    )
    with transaction.atomic():
        for workspace, _role in workspaces_for_user(account):
            audit_record(
                workspace_id=workspace.pk,
                actor=actor,
                action="user.lockout",
                target_type="user",
                target_id=str(account.pk),
                after={"lockedBy": locked_by, "failures": failures, "lockedUntil": until},
            )
