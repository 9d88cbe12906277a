"""The Reflector: active observations (and the sources of stale reflections), through the
redaction gate to the engine, condensed into reflections.

Only what a reflection cites leaves the context: an observation the engine condensed
(merged, superseded, summed up) is cited by the reflection that says it now, and becomes
reflected; one nothing condensed stays active and is served as it is. An engine that
finds nothing to condense returns no reflection, and the run succeeds having changed
nothing. The run's ``items_in`` and ``tokens_in`` count the observations its reflections
condensed, so that tokens in over tokens out is the Reflector's own compression."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_record
from governance.redaction.gates import (
    RedactionGateError,
    labels_as_given,
    observations_pending_review,
    redaction_gate_for_reflection,
)
from memory.approval.flags import Source, waits_for
from memory.approval.policy import approval_modes
from memory.engines.base import PRIORITIES, Engine, EngineError, SourceObservation
from memory.grounding import grounding_score
from memory.models import (
    PERSONS_WORDS,
    Conversation,
    Observation,
    PipelineRun,
    Reflection,
    ReflectorRun,
)
from memory.pipeline import engines
from memory.pipeline.runs import RunOutcome, engine_error, run_execute, run_finish
from memory.selectors import held_for_approval_ids, rederivable_reflections
from memory.tokens import token_count


@dataclass(frozen=True)
class ReflectionInputs:
    observations: list[SourceObservation]
    # Each input's version as it was read, and the stale reflections being re-derived:
    # a correction made while the engine works changes one or the other.
    versions: dict[str, int]
    stale: list[Reflection]


def _reflection_inputs(*, conversation: Conversation, include_active: bool) -> ReflectionInputs:
    """What a Reflector run reads: the active observations (unless the run only
    re-derives) and every source of a stale reflection still stored, though reflected
    already, so that the reflection is made again from its sources as they now stand.
    Never a note in a person's words (``PERSONS_WORDS``): it is served as they wrote it,
    and a stale reflection they wrote is not made again; nor one a reflection waiting for
    approval, or rejected, cites (memory/approval/)."""
    stale = list(rederivable_reflections(conversation=conversation))
    wanted = Q(pk__in={str(i) for r in stale for i in r.source_observation_ids})
    if include_active:
        wanted |= Q(status=Observation.Status.ACTIVE)
    observations = list(
        Observation.objects.filter(wanted, conversation=conversation)
        .exclude(PERSONS_WORDS)
        .exclude(pk__in=held_for_approval_ids(conversation=conversation))
        .order_by("observed_at", "window_start_seq", "created_at")
    )
    # The gate stores each observation redacted and gives the Reflector that text, with
    # findings pending review masked as well; it raises a retryable gate error while
    # the policy makes reflection wait for reviews.
    try:
        texts = redaction_gate_for_reflection(conversation=conversation, observations=observations)
    except RedactionGateError as error:
        raise engine_error(error) from None
    return ReflectionInputs(
        observations=[
            SourceObservation(
                id=str(o.pk),
                text=texts[str(o.pk)],  # never o.text: the gate fails closed
                priority=o.priority,
                observed_at=o.observed_at,
                referenced_at=o.referenced_at,
                token_count=o.token_count,
            )
            for o in observations
        ],
        versions={str(o.pk): o.version for o in observations},
        stale=stale,
    )


def observations_for_reflection(*, conversation: Conversation) -> list[SourceObservation]:
    """The only way the Reflector reads observations (the redaction gate sits here)."""
    return _reflection_inputs(conversation=conversation, include_active=True).observations


def _check_inputs_unchanged(conversation: Conversation, inputs: ReflectionInputs) -> None:
    """Raise a retryable error if memory was corrected since the run read its inputs (an
    input edited or deleted, a reflection made stale or edited back to active): what
    the engine wrote may repeat what the correction took out. Locks what it reads, so a
    correction that comes later waits for this run and then sees its reflections."""
    stale_now = set(
        rederivable_reflections(conversation=conversation)
        .select_for_update()
        .values_list("pk", flat=True)
    )
    versions_now = {
        str(pk): version
        for pk, version in Observation.objects.select_for_update()
        .filter(pk__in=list(inputs.versions))
        .values_list("pk", "version")
    }
    if stale_now != {r.pk for r in inputs.stale} or versions_now != inputs.versions:
        raise EngineError(
            "memory was corrected while the Reflector worked; the run will retry",
            retryable=True,
        )


def _reflector_model(engine: Engine) -> str:
    # An LLM engine may use a different (often larger) model to reflect than to observe.
    return getattr(engine, "reflector_model", "") or engine.model


def _supersede_stale(
    conversation: Conversation, inputs: ReflectionInputs, reflections: list[Reflection]
) -> None:
    """The stale reflections give way to what the Reflector made of their sources: each
    is superseded (kept, with its history) and points to the first new reflection that
    cites one of its sources, none when nothing did (its sources were all deleted)."""
    now = timezone.now()
    for stale in inputs.stale:
        sources = {str(i) for i in stale.source_observation_ids}
        replacements = [
            str(r.pk) for r in reflections if sources & {str(i) for i in r.source_observation_ids}
        ]
        pending = [
            r.pk
            for r in reflections
            if r.status == Reflection.Status.WAITING
            and sources & {str(i) for i in r.source_observation_ids}
        ]
        if pending:
            # Its replacement waits for a person: it goes on serving its sources in its
            # place, and is superseded when the replacement is approved (or given up
            # when it is rejected): memory/approval/services.py.
            Reflection.objects.filter(pk=stale.pk, status=Reflection.Status.STALE).update(
                superseded_by_id=pending[0], updated_at=now
            )
            continue
        Reflection.objects.filter(pk=stale.pk, status=Reflection.Status.STALE).update(
            status=Reflection.Status.SUPERSEDED,
            superseded_by_id=replacements[0] if replacements else None,
            updated_at=now,
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=SYSTEM_ACTOR,
            action="reflection.rederive",
            target_type="reflection",
            target_id=str(stale.pk),
            before={"status": Reflection.Status.STALE, "version": stale.version},
            after={"status": Reflection.Status.SUPERSEDED, "replacedBy": replacements},
            reason="re-derived by the Reflector from its sources as they now stand",
        )


def _hold_for_approval(
    conversation: Conversation,
    reflections: list[Reflection],
    sources_in: list[SourceObservation],
) -> None:
    """Make each new reflection the workspace's approval policy holds back ``waiting``,
    with the reasons (memory/approval/)."""
    modes = approval_modes(conversation)
    if not modes:
        return
    by_id = {o.id: o for o in sources_in}
    pending = observations_pending_review(
        observation_ids={i for r in reflections for i in r.source_observation_ids}
    )
    for reflection in reflections:
        sources = [by_id[i] for i in reflection.source_observation_ids]
        reasons = waits_for(
            modes,
            text=reflection.text,
            referenced_at=reflection.referenced_at,
            grounding=reflection.grounding,
            sources=[Source(o.id, o.text, o.priority, o.referenced_at) for o in sources],
            pending_review=bool(pending & set(reflection.source_observation_ids)),
        )
        if reasons:
            reflection.status, reflection.waits_for = Reflection.Status.WAITING, reasons


def _reflect(run: ReflectorRun, token: uuid.UUID, started: float) -> None:
    conversation = run.conversation
    inputs = _reflection_inputs(
        conversation=conversation,
        # A run scheduled by a correction re-derives only: active observations wait for
        # their threshold as they would have without it.
        include_active=run.trigger != PipelineRun.Trigger.CORRECTION,
    )
    # Looked up through its module: the one place a test installs a fake engine.
    engine = engines.engine_for_workspace(conversation.workspace)
    sources_in = inputs.observations
    drafts = engine.reflect(sources_in, now=timezone.now()) if sources_in else []
    # A pseudonym the engine wrote wrong is written as the label it was given.
    drafts = labels_as_given(drafts, given=[o.text for o in sources_in])
    input_ids = {o.id for o in sources_in}
    observed = {o.id: o.observed_at for o in sources_in}
    texts = {o.id: o.text for o in sources_in}
    tokens_of = {o.id: o.token_count for o in sources_in}
    written_at = timezone.now()
    windows = {
        str(pk): (start, end, start_at, end_at)
        for pk, start, end, start_at, end_at in Observation.objects.filter(
            pk__in=input_ids
        ).values_list(
            "pk", "window_start_seq", "window_end_seq", "window_start_at", "window_end_at"
        )
    }
    # A re-derived reflection takes the generation of the stale one it replaces, so it
    # is served where that one was.
    replaced_generation: dict[str, int] = {}
    for stale in inputs.stale:
        for i in stale.source_observation_ids:
            replaced_generation[str(i)] = min(
                replaced_generation.get(str(i), stale.generation), stale.generation
            )
    stale_sources = set(replaced_generation)
    with transaction.atomic():
        _check_inputs_unchanged(conversation, inputs)
        generation = (
            Reflection.objects.filter(conversation=conversation).aggregate(g=Max("generation"))["g"]
            or 0
        ) + 1
        reflections = []
        for draft in drafts:
            sources = [i for i in dict.fromkeys(draft.source_observation_ids) if i in input_ids]
            if not sources or draft.priority not in PRIORITIES or not draft.text.strip():
                raise EngineError("the engine returned a reflection without valid sources")
            spans = [windows[i] for i in sources if windows.get(i) and windows[i][0] is not None]
            replaced = [replaced_generation[i] for i in sources if i in replaced_generation]
            reflections.append(
                Reflection(
                    conversation=conversation,
                    text=draft.text.strip(),
                    priority=draft.priority,
                    generation=min(replaced) if replaced else generation,
                    # The newest of its sources: what the reflection knows is as of then.
                    observed_at=max(observed[i] for i in sources),
                    referenced_at=draft.referenced_at,
                    written_at=written_at,
                    grounding=grounding_score(draft.text, [texts[i] for i in sources]),
                    window_start_seq=min((s[0] for s in spans if s[0] is not None), default=None),
                    window_end_seq=max((s[1] for s in spans if s[1] is not None), default=None),
                    window_start_at=min((s[2] for s in spans if s[2]), default=None),
                    window_end_at=max((s[3] for s in spans if s[3]), default=None),
                    source_observation_ids=sources,
                    engine=engine.name,
                    model_name=_reflector_model(engine),
                    tags=draft.tags,
                    topics=draft.topics,
                    token_count=token_count(draft.text.strip()),
                )
            )
        _hold_for_approval(conversation, reflections, sources_in)
        cited = list(dict.fromkeys(i for r in reflections for i in r.source_observation_ids))
        run_finish(
            ReflectorRun,
            run,
            token,
            started=started,
            engine=engine.name,
            model_name=_reflector_model(engine),
            prompt_version=engine.prompt_version,
            generation=max((r.generation for r in reflections), default=None),
            items_in=len(cited),
            items_out=len(reflections),
            tokens_in=sum(tokens_of[i] for i in cited),
            tokens_out=sum(r.token_count for r in reflections),
        )
        Reflection.objects.bulk_create(reflections)
        waiting = [r for r in reflections if r.status == Reflection.Status.WAITING]
        held = {i for r in waiting for i in r.source_observation_ids}
        linked: set[str] = set()
        for reflection in reflections:
            if reflection.status == Reflection.Status.WAITING:
                continue  # its sources stay served as they are until a person approves it
            # Each observation links to the first reflection that cites it: an active
            # one becomes reflected, a stale reflection's source moves to its successor.
            ids = [i for i in reflection.source_observation_ids if i not in linked]
            Observation.objects.filter(
                Q(status=Observation.Status.ACTIVE) | Q(pk__in=stale_sources & set(ids)),
                pk__in=ids,
            ).update(status=Observation.Status.REFLECTED, reflection=reflection)
            linked.update(ids)
        # An active input no reflection cites stays active. A stale reflection's source
        # that nothing cites now is served again as an observation, unless another
        # reflection still in the context says it.
        restored = _restore_uncited(conversation, inputs, stale_sources - linked - held)
        _supersede_stale(conversation, inputs, reflections)
        changed = bool(reflections or inputs.stale or restored)
        if changed:
            audit_record(
                workspace_id=conversation.workspace_id,
                actor=SYSTEM_ACTOR,
                action="memory.reflect",
                target_type="reflector_run",
                target_id=str(run.pk),
                after={
                    "conversationId": str(conversation.pk),
                    "reflections": [str(r.pk) for r in reflections],
                    "observationsRead": len(input_ids),
                    "observationsReflected": len(cited),
                    "observationsRestored": restored,
                    "waitingForApproval": [str(r.pk) for r in waiting],
                    "trigger": run.trigger,
                },
            )
            Conversation.objects.filter(pk=conversation.pk).update(
                memory_version=F("memory_version") + 1
            )


def _restore_uncited(
    conversation: Conversation, inputs: ReflectionInputs, uncited: set[str]
) -> int:
    """Serve again the stale reflections' sources that no new reflection cites: each
    goes back to active, unless a reflection still active cites it (then it links to
    that one). Returns how many became active."""
    if not uncited:
        return 0
    still_cited: dict[str, Reflection] = {}
    for reflection in Reflection.objects.filter(
        conversation=conversation, status=Reflection.Status.ACTIVE
    ).exclude(pk__in=[r.pk for r in inputs.stale]):
        for i in reflection.source_observation_ids:
            still_cited.setdefault(str(i), reflection)
    relinked: dict[Reflection, list[str]] = defaultdict(list)
    for pk in sorted(set(still_cited) & uncited):
        relinked[still_cited[pk]].append(pk)
    for reflection, pks in relinked.items():
        Observation.objects.filter(pk__in=pks).update(reflection=reflection)
    return Observation.objects.filter(pk__in=uncited - set(still_cited)).update(
        status=Observation.Status.ACTIVE, reflection=None
    )


def reflector_run_execute(
    *,
    run_id: uuid.UUID | str,
    final_attempt: bool = True,
    retry_in: float = 0,
    deadline: float | None = None,
) -> RunOutcome:
    """Claim and run the reflector run; after a retryable error that is not the final
    attempt, the run is RETRYING, to be tried again in ``retry_in`` seconds. Past
    ``deadline`` (``time.monotonic()``; main thread only) the run goes back to the queue."""
    return run_execute(
        ReflectorRun,
        run_id,
        _reflect,
        final_attempt=final_attempt,
        retry_in=retry_in,
        deadline=deadline,
    )
