"""The Observer: a window of unobserved messages (and the tool calls recorded with
them), through the redaction gate to the engine, stored as observations."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_record
from governance.redaction.gates import (
    ObserverReading,
    RedactionGateError,
    labels_as_given,
    observer_reading,
    observer_run_summary,
)
from memory.approval.flags import observation_waits_for
from memory.approval.policy import approval_modes
from memory.engines.base import MEMORY_BLOCK_HEADER, PRIORITIES, EngineError, SourceMessage
from memory.grounding import grounding_score
from memory.models import (
    Conversation,
    MemorySource,
    Message,
    Observation,
    ObserverRun,
    ToolCall,
)
from memory.pipeline import engines
from memory.pipeline.runs import RunOutcome, engine_error, run_execute, run_finish
from memory.pipeline.scheduling import reflector_schedule_if_due
from memory.references import references_in
from memory.selectors import active_observations, unobserved_messages
from memory.tokens import token_count

# Earlier observations given to the Observer so that it does not repeat itself.
PREVIOUS_OBSERVATIONS_TAIL = 20


def _is_injected_memory(message: Message) -> bool:
    return message.role == Message.Role.SYSTEM and message.content.startswith(MEMORY_BLOCK_HEADER)


def _window_tool_calls(conversation: Conversation, window: list[Message]) -> list[ToolCall]:
    """The tool calls the Observer reads with ``window``: those recorded after the
    message before it and before its last message, each read with the message that
    follows it. One recorded after the window's last message waits for the next window,
    with the message (usually the assistant's answer) that will follow it."""
    if not window:
        return []
    return list(
        ToolCall.objects.filter(
            conversation=conversation,
            after_seq__gte=window[0].seq - 1,
            after_seq__lt=window[-1].seq,
        ).order_by("after_seq", "created_at", "id")
    )


def _with_tool_calls(
    messages: list[SourceMessage], calls: list[ToolCall], outputs: list[str]
) -> list[SourceMessage]:
    """The engine's input: the messages with each tool call as a ``tool`` message (its
    output, its tool's name, its own time) right after the message it followed, renumbered
    in that order (the engines order their input by seq). Messages keep their ids, which
    is all the run maps back."""
    if not calls:
        return messages
    entries: list[tuple[tuple[int, int, int], SourceMessage]] = [
        ((m.seq, 0, 0), m) for m in messages
    ]
    entries += [
        (
            (call.after_seq, 1, index),
            SourceMessage(
                id=str(call.pk),
                seq=0,
                role=Message.Role.TOOL,
                content=output,
                created_at=call.created_at,
                tool_name=call.tool_name,
            ),
        )
        for index, (call, output) in enumerate(zip(calls, outputs, strict=True))
    ]
    entries.sort(key=lambda entry: entry[0])
    return [
        SourceMessage(
            id=m.id,
            seq=number,
            role=m.role,
            content=m.content,
            created_at=m.created_at,
            tool_name=m.tool_name,
            speaker=m.speaker,
        )
        for number, (_, m) in enumerate(entries, start=1)
    ]


def _through_gates(
    conversation: Conversation, observable: list[Message], calls: list[ToolCall]
) -> ObserverReading:
    """The window as the engine may read it: one gate call, one read of the policy.
    Messages and the tool calls recorded over the reasoning API (tool output to the
    Observer) are redacted when the policy says so, as stored otherwise; speakers are
    named only when contents are not redacted (a name is personal data the redaction of
    contents does not see)."""
    try:
        return observer_reading(
            conversation=conversation,
            messages=observable,
            tool_outputs=[c.observed_output for c in calls],
        )
    except RedactionGateError as error:
        raise engine_error(error) from None


def _observe(run: ObserverRun, token: uuid.UUID, started: float) -> None:
    conversation = run.conversation
    # The window is fixed now: messages that arrive while the engine works have higher
    # seq numbers, stay unobserved and recent, and wait for the next run.
    window = list(
        unobserved_messages(conversation=conversation).filter(seq__lte=conversation.last_seq)
    )
    by_id = {str(m.pk): m for m in window}
    observable = [m for m in window if not _is_injected_memory(m)]
    previous = list(
        active_observations(conversation=conversation)
        .order_by("-observed_at", "-window_end_seq")
        .values_list("text", flat=True)[:PREVIOUS_OBSERVATIONS_TAIL]
    )[::-1]
    # Looked up through its module: the one place a test installs a fake engine.
    engine = engines.engine_for_workspace(conversation.workspace)
    now = timezone.now()
    output = None
    said: dict[uuid.UUID, str] = {}  # what the engine read, which grounds its notes
    calls: list[ToolCall] = []
    tool_tokens = 0
    reading: ObserverReading | None = None
    if observable:
        calls = _window_tool_calls(conversation, window)
        reading = _through_gates(conversation, observable, calls)
        contents, outputs = list(reading.contents), list(reading.tool_outputs)
        speakers = list(reading.speakers)
        said = {
            m.pk: f"{content} {m.tool_name}"
            for m, content in zip(observable, contents, strict=True)
        }
        for call, text in zip(calls, outputs, strict=True):
            # A note made from a call is sourced to the message that follows it, and
            # grounded in what the call said too.
            follower = next(m for m in window if m.seq > call.after_seq)
            by_id[str(call.pk)] = follower
            said[follower.pk] = f"{said.get(follower.pk, '')} {text} {call.tool_name}"
            tool_tokens += token_count(text)
        output = engine.observe(
            _with_tool_calls(
                [
                    SourceMessage(
                        id=str(m.pk),
                        seq=m.seq,
                        role=m.role,
                        content=content,
                        created_at=m.created_at,
                        tool_name=m.tool_name,
                        speaker=speaker,
                    )
                    for m, content, speaker in zip(observable, contents, speakers, strict=True)
                ],
                calls,
                outputs,
            ),
            previous_observations=previous,
            now=now,
            fidelity=conversation.workspace.effective_fidelity,
        )
    # What the engine said beside its notes is kept on the run: it goes through the
    # redaction gate like the notes do.
    current_task, suggested_response = observer_run_summary(
        conversation=conversation,
        reading=reading,
        texts=[
            (output.current_task or "") if output else "",
            (output.suggested_response or "") if output else "",
        ],
    )
    drafts = output.observations if output else []
    # A pseudonym the engine wrote wrong is written as the label it was given.
    speakers_read = reading.speakers if reading is not None else ()
    drafts = labels_as_given(drafts, given=[*said.values(), *speakers_read, *previous])
    observations = []
    for draft in drafts:
        sources = sorted(
            {by_id[i].pk: by_id[i] for i in draft.source_message_ids if i in by_id}.values(),
            key=lambda m: m.seq,
        )
        if not sources or draft.priority not in PRIORITIES or not draft.text.strip():
            raise EngineError("the engine returned an observation without valid sources")
        references = references_in(draft.text)
        observations.append(
            Observation(
                conversation=conversation,
                text=draft.text.strip(),
                priority=draft.priority,
                # Dated by when its sources were said, not by when this run happened
                # (written_at): an imported history keeps its own dates.
                observed_at=sources[-1].created_at,
                referenced_at=draft.referenced_at,
                written_at=now,
                grounding=grounding_score(draft.text, [said.get(m.pk, "") for m in sources]),
                window_start_seq=sources[0].seq,
                window_end_seq=sources[-1].seq,
                window_start_at=sources[0].created_at,
                window_end_at=sources[-1].created_at,
                source_message_ids=[str(m.pk) for m in sources],
                source=MemorySource.OBSERVER,
                engine=engine.name,
                model_name=engine.model,
                tags=[*draft.tags, *(t for t in references.tags if t not in draft.tags)],
                topics=draft.topics,
                ticket_id=references.ticket_id,
                token_count=token_count(draft.text.strip()),
            )
        )
    modes = approval_modes(conversation)
    for observation in observations:
        reasons = observation_waits_for(modes, grounding=observation.grounding)
        if reasons:  # not served until a person approves it (memory/approval/)
            observation.status, observation.waits_for = Observation.Status.WAITING, reasons
    with transaction.atomic():
        run_finish(
            ObserverRun,
            run,
            token,
            started=started,
            engine=engine.name,
            model_name=engine.model,
            prompt_version=engine.prompt_version,
            window_start_seq=window[0].seq if window else None,
            window_end_seq=window[-1].seq if window else None,
            items_in=len(observable) + len(calls),
            items_out=len(observations),
            tokens_in=sum(m.token_count for m in observable) + tool_tokens,
            tokens_out=sum(o.token_count for o in observations),
            current_task=current_task,
            suggested_response=suggested_response,
        )
        Observation.objects.bulk_create(observations)
        if observations:
            # One event per run, naming what it wrote (ids, never text): memory a
            # worker writes is in the audit trail like memory a person writes.
            audit_record(
                workspace_id=conversation.workspace_id,
                actor=SYSTEM_ACTOR,
                action="memory.observe",
                target_type="observer_run",
                target_id=str(run.pk),
                after={
                    "conversationId": str(conversation.pk),
                    "observations": [str(o.pk) for o in observations],
                    "waitingForApproval": [
                        str(o.pk) for o in observations if o.status == Observation.Status.WAITING
                    ],
                    "window": [window[0].seq, window[-1].seq] if window else None,
                    "trigger": run.trigger,
                },
            )
        Conversation.objects.filter(pk=conversation.pk).update(
            memory_version=F("memory_version") + 1
        )
        reflector_schedule_if_due(conversation=conversation)


def observer_run_execute(
    *,
    run_id: uuid.UUID | str,
    final_attempt: bool = True,
    retry_in: float = 0,
    deadline: float | None = None,
) -> RunOutcome:
    """Claim and run the observer run; after a retryable error that is not the final
    attempt, the run is RETRYING, to be tried again in ``retry_in`` seconds. Past
    ``deadline`` (``time.monotonic()``; main thread only) the run goes back to the queue."""
    return run_execute(
        ObserverRun,
        run_id,
        _observe,
        final_attempt=final_attempt,
        retry_in=retry_in,
        deadline=deadline,
    )
