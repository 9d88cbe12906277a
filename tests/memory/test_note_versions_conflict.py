"""No lost updates on observations and reflections: a read answers with the note's
version as its ETag, and a write made from an earlier version (``If-Match`` or the
body's ``version``) is refused and changes nothing. Writes that name no version go
through as they always did (the NAMS clients send none)."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent
from memory.mcp.callers import HttpCaller, McpToolError
from memory.mcp.tools import run_tool
from memory.models import Observation, ObservationVersion, Reflection, ReflectionVersion
from tenancy.models import ApiKey
from tests.memory.factories import ObservationFactory, ReflectionFactory

VERSIONS = {"observations": ObservationVersion, "reflections": ReflectionVersion}


@pytest.fixture(params=["observations", "reflections"])
def tier(request) -> str:
    return request.param


@pytest.fixture
def note(tier, conversation) -> Observation | Reflection:
    factory = ObservationFactory if tier == "observations" else ReflectionFactory
    return factory(conversation=conversation, text="User prefers email.", priority="medium")


def _url(note: Observation | Reflection, tier: str, action: str = "") -> str:
    url = f"/v1/conversations/{note.conversation_id}/{tier}/{note.pk}"
    return f"{url}/{action}" if action else url


def _versions_kept(tier: str, note: Observation | Reflection) -> int:
    model = VERSIONS[tier]
    key = "observation_id" if tier == "observations" else "reflection_id"
    return model.objects.filter(**{key: note.pk}).count()


def test_a_read_and_an_edit_answer_with_the_version_as_etag(curator_api, tier, note):
    read = curator_api.get(_url(note, tier))
    assert read.status_code == 200
    assert read["ETag"] == '"1"' and read.json()["version"] == 1

    edited = curator_api.patch(
        _url(note, tier), {"priority": "high", "reason": "urgent"}, format="json"
    )
    assert edited.status_code == 200
    assert edited["ETag"] == '"2"' and edited.json()["version"] == 2
    assert curator_api.get(_url(note, tier))["ETag"] == '"2"'


def test_an_edit_from_a_stale_if_match_is_refused_412_and_changes_nothing(curator_api, tier, note):
    etag = curator_api.get(_url(note, tier))["ETag"]
    first = curator_api.patch(
        _url(note, tier),
        {"priority": "high", "reason": "urgent"},
        format="json",
        headers={"If-Match": etag},
    )
    assert first.status_code == 200

    # The second writer read the same version: their text edit would send back the
    # priority they saw.
    stale = curator_api.patch(
        _url(note, tier),
        {"content": "User prefers SMS.", "priority": "medium", "reason": "typo"},
        format="json",
        headers={"If-Match": etag},
    )

    assert stale.status_code == 412
    body = stale.json()
    assert body["code"] == "precondition_failed"
    assert "version 2" in body["message"] and '"1"' in body["message"]
    note.refresh_from_db()
    assert (note.text, note.priority, note.version) == ("User prefers email.", "high", 2)
    assert _versions_kept(tier, note) == 1
    assert AuditEvent.objects.filter(target_id=str(note.pk)).count() == 1


def test_an_edit_from_the_current_if_match_goes_through(curator_api, tier, note):
    response = curator_api.patch(
        _url(note, tier),
        {"content": "User prefers SMS.", "reason": "typo"},
        format="json",
        headers={"If-Match": '"1"'},
    )
    assert response.status_code == 200
    note.refresh_from_db()
    assert (note.text, note.version) == ("User prefers SMS.", 2)


def test_a_stale_version_in_the_body_is_refused_409(curator_api, tier, note):
    curator_api.patch(_url(note, tier), {"priority": "high", "reason": "urgent"}, format="json")

    stale = curator_api.patch(
        _url(note, tier),
        {"content": "User prefers SMS.", "version": 1, "reason": "typo"},
        format="json",
    )

    assert stale.status_code == 409
    body = stale.json()
    assert (body["code"], body["field"]) == ("version_conflict", "version")
    assert "version 2" in body["message"]
    note.refresh_from_db()
    assert (note.text, note.version) == ("User prefers email.", 2)

    current = curator_api.patch(
        _url(note, tier),
        {"content": "User prefers SMS.", "version": 2, "reason": "typo"},
        format="json",
    )
    assert current.status_code == 200 and current.json()["version"] == 3


def test_without_a_version_writes_go_through_as_before(curator_api, tier, note):
    for priority in ("high", "low"):
        response = curator_api.patch(
            _url(note, tier), {"priority": priority, "reason": "triage"}, format="json"
        )
        assert response.status_code == 200
    note.refresh_from_db()
    assert (note.priority, note.version) == ("low", 3)


def test_a_delete_from_a_stale_version_is_refused_and_keeps_the_note(curator_api, tier, note):
    curator_api.patch(_url(note, tier), {"priority": "high", "reason": "urgent"}, format="json")

    by_header = curator_api.delete(
        _url(note, tier) + "?reason=duplicate", headers={"If-Match": '"1"'}
    )
    by_body = curator_api.delete(
        _url(note, tier), {"reason": "duplicate", "version": 1}, format="json"
    )

    assert (by_header.status_code, by_header.json()["code"]) == (412, "precondition_failed")
    assert (by_body.status_code, by_body.json()["code"]) == (409, "version_conflict")
    assert type(note).objects.filter(pk=note.pk).exists()
    assert not AuditEvent.objects.filter(action__endswith=".delete").exists()

    current = curator_api.delete(
        _url(note, tier) + "?reason=duplicate", headers={"If-Match": '"2"'}
    )
    assert current.status_code == 204
    assert not type(note).objects.filter(pk=note.pk).exists()


def test_a_revert_from_a_stale_if_match_is_refused(curator_api, tier, note):
    curator_api.patch(_url(note, tier), {"priority": "high", "reason": "urgent"}, format="json")
    curator_api.patch(_url(note, tier), {"priority": "low", "reason": "done"}, format="json")

    stale = curator_api.post(
        _url(note, tier, "revert"),
        {"version": 1, "reason": "undo"},
        format="json",
        headers={"If-Match": '"2"'},
    )
    assert (stale.status_code, stale.json()["code"]) == (412, "precondition_failed")
    note.refresh_from_db()
    assert (note.priority, note.version) == ("low", 3)

    current = curator_api.post(
        _url(note, tier, "revert"),
        {"version": 1, "reason": "undo"},
        format="json",
        headers={"If-Match": '"3"'},
    )
    assert current.status_code == 200 and current["ETag"] == '"4"'


def test_if_match_any_goes_through_and_a_malformed_one_is_refused(curator_api, tier, note):
    anything = curator_api.patch(
        _url(note, tier),
        {"priority": "high", "reason": "urgent"},
        format="json",
        headers={"If-Match": "*"},
    )
    assert anything.status_code == 200

    for header in ("2", 'W/"2"', '"2", "3"'):
        refused = curator_api.patch(
            _url(note, tier),
            {"priority": "low", "reason": "done"},
            format="json",
            headers={"If-Match": header},
        )
        assert refused.status_code == 400, header
        assert refused.json()["code"] == "invalid_if_match"
    note.refresh_from_db()
    assert (note.priority, note.version) == ("high", 2)


def test_if_match_and_a_different_body_version_are_refused(curator_api, tier, note):
    response = curator_api.patch(
        _url(note, tier),
        {"priority": "high", "version": 2, "reason": "urgent"},
        format="json",
        headers={"If-Match": '"1"'},
    )
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("conflicting_fields", "version")
    note.refresh_from_db()
    assert note.version == 1


# --- MCP ---------------------------------------------------------------------------------------


def _mcp(curator_api) -> HttpCaller:
    api_key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(curator_api.raw_key))
    return HttpCaller(api_key=api_key, request_id="mcp-test", ip_address=None)


def test_the_mcp_edit_tools_refuse_a_stale_version_as_a_tool_error(curator_api, tier, note):
    caller = _mcp(curator_api)
    tool, id_name = (
        ("edit_observation", "observationId")
        if tier == "observations"
        else ("edit_reflection", "reflectionId")
    )
    arguments = {"conversationId": str(note.conversation_id), id_name: str(note.pk)}

    edited = run_tool(caller, tool, {**arguments, "priority": "high", "reason": "urgent"})
    assert (edited["priority"], edited["version"]) == ("high", 2)

    with pytest.raises(McpToolError, match="version 2"):
        run_tool(
            caller,
            tool,
            {**arguments, "content": "User prefers SMS.", "version": 1, "reason": "typo"},
        )
    note.refresh_from_db()
    assert (note.text, note.version) == ("User prefers email.", 2)

    current = run_tool(
        caller, tool, {**arguments, "content": "User prefers SMS.", "version": 2, "reason": "typo"}
    )
    assert (current["text"], current["version"]) == ("User prefers SMS.", 3)
