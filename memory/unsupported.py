"""The NAMS routes Memdesk does not serve, answered honestly.

The NAMS clients (the Python ``neo4j-agent-memory`` and the TypeScript
``@neo4j-labs/agent-memory``) also call routes for a knowledge graph (entities, graph
expansion, Cypher, ontologies, entity provenance) and for key management. Memdesk keeps
memory as observations and reflections of each conversation, so those routes answer
``501`` with a JSON body that names the feature and what to use instead: the Python
client raises its ``NotSupportedError`` on a 501, the TypeScript client a
``TransportError`` whose message is the body's ``error`` sentence. An unknown route would
answer ``404``, which the clients read as "this object does not exist".
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.errors import error_body
from tenancy.api_base import ApiView

CONTEXT_INSTEAD = (
    "read a conversation's memory with GET /v1/conversations/{id}/context (or its "
    "/observations and /reflections) and search its messages with POST "
    "/v1/conversations/{id}/search"
)


@dataclass(frozen=True)
class Unsupported:
    feature: str
    sentence: str
    instead: str


ENTITIES = Unsupported(
    "entities",
    "Entities are not supported by Memdesk: it keeps no entity graph; its memory is the "
    "observations and reflections of each conversation.",
    CONTEXT_INSTEAD,
)
GRAPH = Unsupported(
    "graph",
    "The entity graph is not supported by Memdesk: it keeps no graph of entities and "
    "relationships.",
    CONTEXT_INSTEAD,
)
QUERY = Unsupported(
    "cypher_query",
    "Cypher queries are not supported by Memdesk: it has no graph database to query.",
    CONTEXT_INSTEAD,
)
ONTOLOGIES = Unsupported(
    "ontologies",
    "Ontologies are not supported by Memdesk: it extracts no typed entities to shape.",
    "observations carry free tags and topics; set the Observer's fidelity with PATCH "
    "/v1/workspace/settings",
)
API_KEYS = Unsupported(
    "api_key_management",
    "API key management over the API is not supported by Memdesk.",
    "create and revoke keys on the dashboard's API keys page (a workspace admin), or with "
    "`manage.py create_api_key`",
)
PROVENANCE = Unsupported(
    "entity_provenance",
    "Entity provenance is not supported by Memdesk: it keeps no entities.",
    "each observation lists the messages it was written from in sourceMessageIds, and "
    "each reflection its observations in sourceObservationIds",
)
STEP_EXPLANATION = Unsupported(
    "step_explanation",
    "Explaining a single reasoning step is not supported by Memdesk.",
    "read a conversation's steps and tool calls with GET /v1/reasoning/trace/{conversationId}",
)

# Every route of the clients' endpoint tables that Memdesk does not serve, as Django
# paths under /v1/, with what it asks for.
UNSUPPORTED_ROUTES: dict[str, Unsupported] = {
    "entities": ENTITIES,
    "entities/search": ENTITIES,
    "entities/graph": GRAPH,
    "entities/<str:entity_id>": ENTITIES,
    "entities/<str:entity_id>/feedback": ENTITIES,
    "entities/<str:entity_id>/history": ENTITIES,
    "entities/<str:entity_id>/merge": ENTITIES,
    "graph/expand": GRAPH,
    "query": QUERY,
    "ontologies": ONTOLOGIES,
    "ontologies/active": ONTOLOGIES,
    "ontologies/import": ONTOLOGIES,
    "ontologies/migrations/<str:job_id>": ONTOLOGIES,
    "ontologies/<str:ontology_id>": ONTOLOGIES,
    "ontologies/<str:ontology_id>/diff": ONTOLOGIES,
    "ontologies/<str:ontology_id>/migrate": ONTOLOGIES,
    "ontologies/<str:ontology_id>/clone": ONTOLOGIES,
    "auth/api-keys": API_KEYS,
    "auth/api-keys/<str:key_id>": API_KEYS,
    "auth/api-keys/<str:key_id>/reveal": API_KEYS,
    "auth/api-keys/<str:key_id>/rotate": API_KEYS,
    "auth/refresh": API_KEYS,
    "reasoning/provenance/<str:entity_id>": PROVENANCE,
    "reasoning/explain/<str:step_id>": STEP_EXPLANATION,
}

# The name of every route above: the route walks of the tests tell them apart by it.
URL_NAME = "nams-not-supported"


def not_supported_body(unsupported: Unsupported) -> dict[str, object]:
    sentence = f"{unsupported.sentence} Instead, {unsupported.instead}."
    return error_body("not_supported", sentence, feature=unsupported.feature)


@extend_schema(exclude=True)
class NotSupportedApi(ApiView):
    # Authenticated like every route, so a bad key is still told apart (401); changes
    # nothing, whatever the method.
    unsupported: Unsupported = ENTITIES

    def answer(self, request: Request, **path_ids: str) -> Response:
        return Response(not_supported_body(self.unsupported), status=501)

    get = post = put = patch = delete = answer


def urlpatterns() -> list[URLPattern]:
    return [
        path(route, NotSupportedApi.as_view(unsupported=unsupported), name=URL_NAME)
        for route, unsupported in UNSUPPORTED_ROUTES.items()
    ]
