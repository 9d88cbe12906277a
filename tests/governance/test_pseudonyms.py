"""Pseudonyms: typed labels stable within a workspace, numbered in order of first sight,
stored encrypted, shown (not written) by a preview, revealed only with rights and a
reason, every reveal audited without the value."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.serializers import serialize
from django.db import connection, transaction

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, Pseudonym, PseudonymSighting, RedactionFinding
from governance.redaction import pseudonyms as pseudonyms_module
from governance.redaction.presidio import PolicySpec, PseudonymiserMissing, engine, redact_text
from governance.redaction.pseudonyms import (
    WorkspacePseudonyms,
    decrypt,
    normalise,
    value_digest,
)
from governance.redaction.reveal import pseudonym_reveal
from memory.models import Conversation, Message
from memory.pipeline.reflector import observations_for_reflection
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Workspace
from tenancy.services import workspace_get_or_create
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory

ROOT = Path(__file__).resolve().parents[2]
EMAIL = "dana.whitfield@example.com"
OTHER_EMAIL = "tomas.berg@example.com"


def _ingest(workspace: Workspace, *contents: str, conversation: Conversation | None = None):
    """Messages redacted at ingest (the quickest way through the allocating path)."""
    set_policy(workspace, redact_at_ingest=True)
    conversation = conversation or conversation_create(workspace=workspace)
    return messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=c) for c in contents]
    )


def _stored(messages: list[Message]) -> list[str]:
    return [Message.objects.get(pk=m.pk).content for m in messages]


# --- numbering ------------------------------------------------------------------------------------


def test_the_same_value_is_the_same_pseudonym_across_messages_and_conversations(workspace):
    first = _ingest(workspace, f"Mail {EMAIL} please.", f"Again: {EMAIL}.")
    second = _ingest(workspace, f"Her address is {EMAIL}.")

    assert _stored(first) == ["Mail <EMAIL_ADDRESS_1> please.", "Again: <EMAIL_ADDRESS_1>."]
    assert _stored(second) == ["Her address is <EMAIL_ADDRESS_1>."]
    assert Pseudonym.objects.filter(workspace=workspace).count() == 1


def test_a_second_value_gets_the_next_number_of_its_type(workspace):
    messages = _ingest(workspace, f"Mail {EMAIL} and {OTHER_EMAIL}.", f"Then {OTHER_EMAIL} only.")

    assert _stored(messages) == [
        "Mail <EMAIL_ADDRESS_1> and <EMAIL_ADDRESS_2>.",
        "Then <EMAIL_ADDRESS_2> only.",
    ]


def test_numbers_count_per_type(workspace):
    [message] = _ingest(workspace, f"Mail {EMAIL}, card 4111 1111 1111 1111, {OTHER_EMAIL}.")

    assert _stored([message]) == [
        "Mail <EMAIL_ADDRESS_1>, card <CREDIT_CARD_1>, <EMAIL_ADDRESS_2>."
    ]


def test_each_workspace_numbers_its_own_values(workspace, other_workspace):
    _ingest(workspace, f"Mail {EMAIL}.")
    [theirs] = _ingest(other_workspace, f"Mail {OTHER_EMAIL} or {EMAIL}.")

    assert _stored([theirs]) == ["Mail <EMAIL_ADDRESS_1> or <EMAIL_ADDRESS_2>."]
    ours = Pseudonym.objects.get(workspace=workspace)
    mine_there = Pseudonym.objects.get(workspace=other_workspace, number=2)
    # The same value, unlinkable across workspaces: different digests.
    assert ours.digest != mine_there.digest


def test_another_spelling_of_a_value_is_the_same_pseudonym(workspace):
    messages = _ingest(workspace, f"Mail {EMAIL}.", f"Mail {EMAIL.upper()}.")

    assert _stored(messages) == ["Mail <EMAIL_ADDRESS_1>.", "Mail <EMAIL_ADDRESS_1>."]


@pytest.mark.parametrize(
    ("entity_type", "one", "other"),
    [
        ("EMAIL_ADDRESS", "Dana.Whitfield@Example.com", " dana.whitfield@example.com"),
        ("PERSON", "Dana  Whitfield", "dana whitfield"),
        ("PHONE_NUMBER", "(977) 625-2661", "977.625.2661"),
        ("CREDIT_CARD", "4111 1111 1111 1111", "4111-1111-1111-1111"),
        ("IBAN_CODE", "DE89 3704 0044 0532 0130 00", "de89370400440532013000"),
    ],
)
def test_values_are_compared_in_their_normal_form(entity_type, one, other):
    assert normalise(entity_type, one) == normalise(entity_type, other)
    assert value_digest(workspace_id="w", entity_type=entity_type, value=one) == value_digest(
        workspace_id="w", entity_type=entity_type, value=other
    )


def test_different_values_and_types_never_share_a_digest():
    digest = value_digest(workspace_id="w", entity_type="PERSON", value="Dana Whitfield")
    assert digest != value_digest(workspace_id="w", entity_type="PERSON", value="Dana Whitmore")
    assert digest != value_digest(workspace_id="w", entity_type="LOCATION", value="Dana Whitfield")
    assert digest != value_digest(workspace_id="w2", entity_type="PERSON", value="Dana Whitfield")


def test_the_value_is_stored_encrypted_and_the_digest_is_keyed(workspace):
    _ingest(workspace, f"Mail {EMAIL}.")

    row = Pseudonym.objects.get()
    dumped = serialize("json", Pseudonym.objects.all())
    assert EMAIL not in dumped and EMAIL.split("@")[0] not in dumped
    assert decrypt(row.value_encrypted) == EMAIL
    # Not a plain hash of the value: without the key it cannot be looked up.
    import hashlib

    assert row.digest not in {
        hashlib.sha256(v.encode()).hexdigest() for v in (EMAIL, f"{workspace.pk}|{EMAIL}")
    }
    assert row.label == "<EMAIL_ADDRESS_1>"


def test_a_rotated_key_cannot_read_stored_values(workspace, settings):
    _ingest(workspace, f"Mail {EMAIL}.")
    row = Pseudonym.objects.get()

    settings.MEMDESK_PSEUDONYM_KEY = "another key of at least thirty-two characters"

    assert decrypt(row.value_encrypted) is None


def test_findings_name_their_pseudonym_and_sightings_name_the_message(workspace):
    [message] = _ingest(workspace, f"Mail {EMAIL}.")

    finding = RedactionFinding.objects.get(target_id=message.pk)
    assert (finding.operator, finding.pseudonym.label) == ("pseudonym", "<EMAIL_ADDRESS_1>")
    sighting = PseudonymSighting.objects.get()
    assert (sighting.target_type, sighting.target_id) == ("message", message.pk)
    event = AuditEvent.objects.get(action="message.redact")
    assert EMAIL not in str(event.after)


def test_the_redaction_event_counts_the_pseudonyms_it_numbered(workspace):
    _ingest(workspace, f"Mail {EMAIL}.", f"Or {EMAIL} and {OTHER_EMAIL}.")
    conversation = conversation_create(workspace=workspace)
    ObservationFactory(conversation=conversation, text=f"User wrote from {OTHER_EMAIL}.")
    ObservationFactory(conversation=conversation, text="User wrote from ops@example.com.")
    observations_for_reflection(conversation=conversation)

    numbered = [
        (e.target_type, e.after["newPseudonyms"])
        for e in AuditEvent.objects.filter(action__endswith=".redact").order_by("sequence")
    ]
    assert sorted(numbered) == [
        ("message", 1),
        ("message", 1),
        ("observation", 0),
        ("observation", 1),
    ]


def test_a_failed_write_gives_its_numbers_back(workspace):
    set_policy(workspace, redact_at_ingest=True)
    conversation = conversation_create(workspace=workspace)

    with pytest.raises(RuntimeError), transaction.atomic():
        messages_append(
            conversation=conversation, items=[MessageInput(role="user", content=f"Mail {EMAIL}")]
        )
        raise RuntimeError("the request failed after the write")

    assert not Pseudonym.objects.exists()
    [message] = _ingest(workspace, f"Mail {OTHER_EMAIL}.", conversation=conversation)
    assert _stored([message]) == ["Mail <EMAIL_ADDRESS_1>."]


def test_an_observation_value_is_held_by_the_source_message_that_says_it(workspace):
    conversation = conversation_create(workspace=workspace)
    holder, bystander = messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=f"My email is {EMAIL}"),
            MessageInput(role="assistant", content="Thanks, noted."),
        ],
    )
    observation = ObservationFactory(
        conversation=conversation,
        text=f"User's email is {EMAIL}.",
        source_message_ids=[str(holder.pk), str(bystander.pk)],
    )

    observations_for_reflection(conversation=conversation)

    observation.refresh_from_db()
    assert observation.text == "User's email is <EMAIL_ADDRESS_1>."
    sighting = PseudonymSighting.objects.get()
    assert (sighting.target_type, sighting.target_id) == ("message", holder.pk)


def test_a_value_from_no_message_is_held_by_its_observation(workspace):
    conversation = conversation_create(workspace=workspace)
    observation = ObservationFactory(conversation=conversation, text=f"Write to {EMAIL}.")

    observations_for_reflection(conversation=conversation)

    sighting = PseudonymSighting.objects.get()
    assert (sighting.target_type, sighting.target_id) == ("observation", observation.pk)


def test_the_pseudonym_operator_needs_a_pseudonymiser():
    spec = PolicySpec(workspace_id="w", version=1)
    text = f"Mail {EMAIL}"
    [found] = engine().detect([text], spec=spec)

    with pytest.raises(PseudonymiserMissing):
        redact_text(text, found, spec=spec)


def test_allocation_outside_a_transaction_is_refused(transactional_db):
    workspace = workspace_get_or_create(name="no-transaction")

    with pytest.raises(RuntimeError, match="inside the redaction's transaction"):
        WorkspacePseudonyms(workspace.pk).label("PERSON", "Dana")
    assert not Pseudonym.objects.exists()


# --- preview --------------------------------------------------------------------------------------


def test_a_compliance_key_sees_known_and_next_pseudonyms_audited_and_numbers_nothing(
    compliance_api, workspace
):
    _ingest(workspace, f"Mail {EMAIL}.")
    audit_before = AuditEvent.objects.count()
    text = f"Mail {OTHER_EMAIL}, {EMAIL} or {OTHER_EMAIL.upper()}."

    response = compliance_api.post("/v1/redaction/preview", {"text": text}, format="json")

    body = response.json()
    assert body["redactedText"] == "Mail <EMAIL_ADDRESS_2>, <EMAIL_ADDRESS_1> or <EMAIL_ADDRESS_2>."
    assert [(f["pseudonym"], f["newPseudonym"]) for f in body["findings"]] == [
        ("<EMAIL_ADDRESS_2>", True),
        ("<EMAIL_ADDRESS_1>", False),
        ("<EMAIL_ADDRESS_2>", True),
    ]
    assert body["newPseudonyms"] == ["<EMAIL_ADDRESS_2>"]
    assert body["pseudonymsShown"] is True
    assert response["Cache-Control"] == "private, no-store"
    assert Pseudonym.objects.count() == 1
    # Which pseudonym a value has is a re-identification: recorded, as counts and types.
    assert AuditEvent.objects.count() == audit_before + 1
    event = AuditEvent.objects.get(action="redaction.preview")
    assert (event.actor_type, event.actor_role) == ("api_key", "compliance")
    assert (event.target_type, event.target_id) == ("workspace", str(workspace.pk))
    assert event.after == {
        "findings": 3,
        "entities": {"EMAIL_ADDRESS": 3},
        "knownPseudonyms": 1,
        "newPseudonyms": 1,
        "policyVersion": body["policyVersion"],
        "draft": False,
    }
    trail = serialize("json", AuditEvent.objects.all())
    for secret in (EMAIL, OTHER_EMAIL, OTHER_EMAIL.upper(), "tomas", "<EMAIL_ADDRESS_1>"):
        assert secret not in trail


def test_an_agent_key_is_told_what_was_found_never_which_pseudonym(
    api, make_client, workspace, other_workspace
):
    text = f"Mail {OTHER_EMAIL}, {EMAIL} or {OTHER_EMAIL.upper()}."
    stranger = make_client(other_workspace)  # a workspace that never met these values
    _ingest(workspace, f"Mail {EMAIL}.")
    audit_before = AuditEvent.objects.count()

    response = api.post("/v1/redaction/preview", {"text": text}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["redactedText"] == "Mail <EMAIL_ADDRESS>, <EMAIL_ADDRESS> or <EMAIL_ADDRESS>."
    assert [
        (f["entityType"], text[f["start"] : f["end"]], f["operator"], f["status"])
        for f in body["findings"]
    ] == [
        ("EMAIL_ADDRESS", OTHER_EMAIL, "pseudonym", "applied"),
        ("EMAIL_ADDRESS", EMAIL, "pseudonym", "applied"),
        ("EMAIL_ADDRESS", OTHER_EMAIL.upper(), "pseudonym", "applied"),
    ]
    assert all(0 < f["score"] <= 1 for f in body["findings"])
    assert {(f["pseudonym"], f["newPseudonym"]) for f in body["findings"]} == {(None, None)}
    assert (body["newPseudonyms"], body["pseudonymsShown"]) == (None, False)
    assert "_1>" not in response.content.decode() and "_2>" not in response.content.decode()
    # Known or not, the answer is the same: it tells nothing of the workspace's mapping.
    theirs = stranger.post("/v1/redaction/preview", {"text": text}, format="json").json()
    assert {**theirs, "policyVersion": None} == {**body, "policyVersion": None}
    assert AuditEvent.objects.count() == audit_before


def test_a_curator_key_is_told_types_as_an_agent_key_is(curator_api, workspace):
    _ingest(workspace, f"Mail {EMAIL}.")

    body = curator_api.post("/v1/redaction/preview", {"text": EMAIL}, format="json").json()

    assert (body["redactedText"], body["pseudonymsShown"]) == ("<EMAIL_ADDRESS>", False)
    assert not AuditEvent.objects.filter(action="redaction.preview").exists()


def test_a_preview_that_names_no_pseudonym_is_not_audited(compliance_api, workspace):
    set_policy(workspace, default_operator="replace")

    for text in ("Nothing personal here.", f"Mail {EMAIL}"):
        response = compliance_api.post("/v1/redaction/preview", {"text": text}, format="json")
        assert response.status_code == 200

    assert not AuditEvent.objects.filter(action="redaction.preview").exists()


def test_a_preview_under_another_operator_names_no_pseudonym(compliance_api, workspace):
    set_policy(workspace, default_operator="replace")

    body = compliance_api.post(
        "/v1/redaction/preview", {"text": f"Mail {EMAIL}"}, format="json"
    ).json()

    assert body["redactedText"] == "Mail <EMAIL_ADDRESS>"
    assert body["findings"][0]["pseudonym"] is None and body["newPseudonyms"] == []


def test_existing_policies_keep_their_operator_and_new_ones_pseudonymise(workspace):
    from governance.models import RedactionPolicy

    assert RedactionPolicy().default_operator == "pseudonym"
    assert RedactionPolicy().agents_see_reidentified is False


# --- reveal ---------------------------------------------------------------------------------------


def test_an_admin_key_reveals_a_pseudonym_with_a_reason_audited_without_the_value(
    admin_api, workspace
):
    _ingest(workspace, f"Mail {EMAIL}.")

    response = admin_api.post(
        "/v1/redaction/pseudonyms/<EMAIL_ADDRESS_1>/reveal",
        {"reason": "customer asked who we hold"},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["label"], body["value"], body["held"]) == ("<EMAIL_ADDRESS_1>", EMAIL, True)
    assert response["Cache-Control"] == "private, no-store"
    event = AuditEvent.objects.get(action="redaction.pseudonym.reveal")
    assert (event.target_type, event.target_id) == ("pseudonym", "<EMAIL_ADDRESS_1>")
    assert (event.reason, event.actor_role) == ("customer asked who we hold", "admin")
    assert EMAIL not in serialize("json", AuditEvent.objects.all())


def test_the_label_may_be_written_without_brackets(admin_api, workspace):
    _ingest(workspace, f"Mail {EMAIL}.")

    response = admin_api.post(
        "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "audit"}, format="json"
    )

    assert response.json()["value"] == EMAIL


def test_a_reveal_without_a_reason_is_refused_and_not_audited(admin_api, workspace):
    _ingest(workspace, f"Mail {EMAIL}.")

    response = admin_api.post("/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {}, format="json")

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("reason_required", "reason")
    assert EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


def test_an_agent_key_cannot_reveal(api, workspace):
    _ingest(workspace, f"Mail {EMAIL}.")

    response = api.post(
        "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "curious"}, format="json"
    )

    assert response.status_code == 403
    assert EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


def test_another_workspace_cannot_reveal_ours(make_client, workspace, other_workspace):
    _ingest(workspace, f"Mail {EMAIL}.")
    stranger = make_client(other_workspace, scope="admin")

    response = stranger.post(
        "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "curious"}, format="json"
    )

    assert response.status_code == 404
    assert EMAIL not in response.content.decode()


def _held_person(workspace: Workspace, number: int, name: str) -> Pseudonym:
    """A stored PERSON pseudonym numbered ``number``, as older notes name it."""
    return Pseudonym.objects.create(
        workspace=workspace,
        entity_type="PERSON",
        number=number,
        digest=value_digest(workspace_id=workspace.pk, entity_type="PERSON", value=name),
        value_encrypted=pseudonyms_module.encrypt(name),
    )


@pytest.mark.parametrize(
    "written",
    [
        "<PERSON_158>",
        "<PERSON158>",
        "PERSON158",
        "<person_158>",
        "Person158",
        "<PERSON_158",
        "person_158>",
        "< PERSON_158 >",
        "<PERSON_0158>",
    ],
)
def test_a_label_is_revealed_as_memory_holds_it(compliance_api, workspace, written):
    # Older notes hold misspelt labels (an engine wrote them before labels_as_given):
    # whoever reads one there can paste it as it is.
    _held_person(workspace, 158, "Priya Natarajan")

    response = compliance_api.post(
        f"/v1/redaction/pseudonyms/{quote(written, safe='')}/reveal",
        {"reason": "subject access request"},
        format="json",
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["label"], body["entityType"], body["number"]) == ("<PERSON_158>", "PERSON", 158)
    assert body["value"] == "Priya Natarajan"
    event = AuditEvent.objects.get(action="redaction.pseudonym.reveal")
    assert (event.target_type, event.target_id) == ("pseudonym", "<PERSON_158>")
    assert "Priya" not in serialize("json", AuditEvent.objects.all())


def test_a_misspelt_label_of_a_workspaces_own_type_is_revealed(compliance_api, workspace):
    Pseudonym.objects.create(
        workspace=workspace,
        entity_type="ORDER_REF",
        number=4,
        digest=value_digest(workspace_id=workspace.pk, entity_type="ORDER_REF", value="ZX-99"),
        value_encrypted=pseudonyms_module.encrypt("ZX-99"),
    )

    response = compliance_api.post(
        "/v1/redaction/pseudonyms/%3CORDER_REF4%3E/reveal", {"reason": "audit"}, format="json"
    )

    assert response.status_code == 200, response.json()
    assert (response.json()["label"], response.json()["value"]) == ("<ORDER_REF_4>", "ZX-99")


@pytest.mark.parametrize(
    ("label", "status", "error"),
    [
        ("PERSON", 400, "invalid_label"),
        ("PERSON_0", 400, "invalid_label"),
        ("<PERSON0>", 400, "invalid_label"),
        ("Priya Natarajan", 400, "invalid_label"),
        ("<PERSON_1> and <PERSON_2>", 400, "invalid_label"),
        ("<WIDGET7>", 400, "invalid_label"),
        ("PERSON_1x", 400, "invalid_label"),
        ("<person_1>", 404, "not_found"),
        ("PERSON_9", 404, "not_found"),
    ],
)
def test_bad_labels_are_clear_errors(admin_api, workspace, label, status, error):
    response = admin_api.post(
        f"/v1/redaction/pseudonyms/{quote(label, safe='')}/reveal",
        {"reason": "audit"},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (status, error)
    if status == 400:
        assert "<PERSON_2>" in response.json()["message"]
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.reveal").exists()


def test_a_reveal_after_the_key_changed_says_so(admin_api, workspace, settings):
    _ingest(workspace, f"Mail {EMAIL}.")
    settings.MEMDESK_PSEUDONYM_KEY = "another key of at least thirty-two characters"

    response = admin_api.post(
        "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "audit"}, format="json"
    )

    assert response.status_code == 409
    assert response.json()["code"] == "pseudonym_unreadable"
    assert "MEMDESK_PSEUDONYM_KEY" in response.json()["message"]


def test_the_service_refuses_a_blank_reason(workspace):
    _ingest(workspace, f"Mail {EMAIL}.")
    from core.errors import MemdeskError

    with pytest.raises(MemdeskError) as refused:
        pseudonym_reveal(
            workspace_id=workspace.pk, label="<EMAIL_ADDRESS_1>", actor=SYSTEM_ACTOR, reason="  "
        )
    assert refused.value.code == "reason_required"


# --- the setting ----------------------------------------------------------------------------------


def test_a_short_pseudonym_key_stops_startup_with_a_sentence():
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.base", MEMDESK_PSEUDONYM_KEY="short")
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode != 0
    assert "MEMDESK_PSEUDONYM_KEY must be at least 32 characters" in result.stderr


# --- concurrency (PostgreSQL) ---------------------------------------------------------------------

THREADS = 8


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("with_policy", [True, False], ids=["policy-row", "workspace-row"])
def test_concurrent_writers_number_each_value_once_without_gaps(with_policy):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    workspace = workspace_get_or_create(name="race")
    if with_policy:  # the lock is taken on the policy row, else on the workspace row
        set_policy(workspace)
    shared = [f"person{n}@example.com" for n in range(6)]
    start = threading.Barrier(THREADS)
    labels: dict[int, dict[str, str]] = {}
    errors: list[BaseException] = []

    def write(thread_no: int) -> None:
        # Every thread numbers the shared values, in its own order, and two of its own.
        values = [*shared, f"own{thread_no}a@example.com", f"own{thread_no}b@example.com"]
        random.Random(thread_no).shuffle(values)
        try:
            start.wait()
            with transaction.atomic():
                pseudonyms = WorkspacePseudonyms(workspace.pk)
                labels[thread_no] = {v: pseudonyms.label("EMAIL_ADDRESS", v) for v in values}
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    numbers = sorted(Pseudonym.objects.filter(workspace=workspace).values_list("number", flat=True))
    assert numbers == list(range(1, len(shared) + 2 * THREADS + 1))
    for value in shared:  # every writer got the one label of each shared value
        assert len({labels[t][value] for t in range(THREADS)}) == 1
    all_labels = {label for found in labels.values() for label in found.values()}
    assert len(all_labels) == len(shared) + 2 * THREADS


def test_the_module_never_logs_values(workspace, caplog):
    caplog.set_level("DEBUG", logger=pseudonyms_module.__name__)
    _ingest(workspace, f"Mail {EMAIL}.")
    assert EMAIL not in caplog.text


def test_the_deploy_check_warns_without_a_pseudonym_key_of_its_own(settings):
    from governance.checks import pseudonym_key_check

    settings.MEMDESK_PSEUDONYM_KEY = ""
    [warning] = pseudonym_key_check()
    assert warning.id == "memdesk.W001" and "rotating SECRET_KEY" in warning.msg

    settings.MEMDESK_PSEUDONYM_KEY = "a key of its own, at least thirty-two characters"
    assert pseudonym_key_check() == []
