"""The OpenAPI 3 document of the web view's REST API, served at ``/api/v1/openapi.json``.

Written by hand next to the routes (``app.py``): each path, its parameters and every
status it may answer, with the shape of the answers a client relies on (extra fields
are allowed: Storm UI's answers carry more). tests/ui/test_openapi.py runs schemathesis
against a live service with it, so a route that answers what this does not say (an
unlisted status, a 500, a field missing) fails there.
"""

from __future__ import annotations

import copy
from typing import Any

_ERROR = {
    "type": "object",
    "required": ["error", "errorMessage"],
    "properties": {"error": {"type": "string"}, "errorMessage": {"type": "string"}},
}
_NUMBER_OR_NULL = {"type": "number", "nullable": True}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR}}}


# Answers any request may get: a Host that is not this service's, a page of another
# origin, a missing token.
_GUARD = {
    "401": _error("the service has a token and the request does not carry it"),
    "403": _error("Host is not a name of this service, or a page of another origin"),
}
_NOT_FOUND = {"404": _error("no such topology (or component)")}

_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "a running topology's name",
    "schema": {"type": "string"},
}
_COMPONENT = {
    "name": "component",
    "in": "path",
    "required": True,
    "description": "a component id of that topology",
    "schema": {"type": "string"},
}
_WAIT = {
    "name": "wait",
    "in": "path",
    "required": True,
    "description": "seconds between deactivating and killing",
    "schema": {"type": "number", "minimum": 0, "maximum": 86400},
}

_SUMMARY_FIELDS: dict[str, Any] = {
    "id": {"type": "string"},
    "name": {"type": "string"},
    "status": {"type": "string", "enum": ["ACTIVE", "INACTIVE", "FAILED", "REBALANCING"]},
    "uptimeSeconds": {"type": "integer"},
    "tasksTotal": {"type": "integer"},
    "workersTotal": {"type": "integer"},
    "emitted": {"type": "integer"},
    "acked": {"type": "integer"},
    "failed": {"type": "integer"},
}
_SUMMARY_ENTRY = {
    "type": "object",
    "required": ["id", "name", "status"],
    "properties": _SUMMARY_FIELDS,
}
_COMPONENT_ROW: dict[str, Any] = {
    "type": "object",
    "required": ["emitted", "acked", "failed", "tasks"],
    "properties": {
        "emitted": {"type": "integer"},
        "acked": {"type": "integer"},
        "failed": {"type": "integer"},
        "tasks": {"type": "integer"},
        "executors": {"type": "integer"},
        "lastError": {"type": "string"},
    },
}
_TOPOLOGY = {
    "type": "object",
    "required": ["id", "name", "status", "spouts", "bolts", "graph", "configuration"],
    "properties": {
        **_SUMMARY_FIELDS,
        "msgTimeout": _NUMBER_OR_NULL,
        "spouts": {
            "type": "array",
            "items": {**_COMPONENT_ROW, "required": [*_COMPONENT_ROW["required"], "spoutId"]},
        },
        "bolts": {
            "type": "array",
            "items": {**_COMPONENT_ROW, "required": [*_COMPONENT_ROW["required"], "boltId"]},
        },
        "graph": {
            "type": "object",
            "required": ["nodes", "edges"],
            "properties": {"nodes": {"type": "array"}, "edges": {"type": "array"}},
        },
        "errors": {"type": "array"},
        "configuration": {"type": "object"},
    },
}
_COMPONENT_PAGE = {
    "type": "object",
    "required": ["topologyId", "componentType", "executorStats", "componentErrors"],
    "properties": {
        "topologyId": {"type": "string"},
        "componentType": {"type": "string", "enum": ["spout", "bolt"]},
        "executorStats": {"type": "array", "items": {"type": "object"}},
        "componentErrors": {"type": "array", "items": {"type": "object"}},
    },
}
_HISTORY = {
    "type": "object",
    "required": ["sampleSecs", "timeline"],
    "properties": {
        "sampleSecs": {"type": "number"},
        "timeline": {"type": "array", "items": {"type": "object", "required": ["t"]}},
    },
}
_OPERATION = {
    "type": "object",
    "required": ["topologyOperation", "topologyId", "status"],
    "properties": {
        "topologyOperation": {"type": "string"},
        "topologyId": {"type": "string"},
        "status": {"type": "string", "enum": ["success"]},
    },
}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _get(summary: str, ok: dict[str, Any], params: list[Any], more: dict | None = None) -> dict:
    return {
        "get": {
            "summary": summary,
            "parameters": params,
            "responses": {"200": ok, **_GUARD, **(more or {})},
        }
    }


_BUSY = {"409": _error("the topology is being rebalanced (or too few Spark slots)")}


def _post(
    summary: str, params: list[Any], more: dict | None = None, body: dict | None = None
) -> dict:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": params,
        "responses": {
            "200": _json("done", _OPERATION),
            **_GUARD,
            **_NOT_FOUND,
            **_BUSY,
            **(more or {}),
        },
    }
    if body is not None:
        operation["requestBody"] = body
    return {"post": operation}


_REBALANCE_BODY = {
    "required": False,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "rebalanceOptions": {
                        "type": "object",
                        "properties": {
                            "numWorkers": {"type": "integer", "minimum": 1},
                            "executors": {
                                "type": "object",
                                "additionalProperties": {"type": "integer", "minimum": 1},
                            },
                        },
                    }
                },
            }
        }
    },
}


_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "tupletree web view",
        "version": "1",
        "description": "Storm UI's REST paths for a running tupletree cluster "
        "(docs/security.md: Host, Origin and the optional token).",
    },
    "components": {
        "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{}, {"token": []}],
    "paths": {
        "/api/v1/openapi.json": _get(
            "this document", _json("the document", {"type": "object"}), []
        ),
        "/api/v1/topology/summary": _get(
            "the running topologies",
            _json(
                "one entry per topology",
                {
                    "type": "object",
                    "required": ["topologies"],
                    "properties": {"topologies": {"type": "array", "items": _SUMMARY_ENTRY}},
                },
            ),
            [],
        ),
        "/api/v1/topology/{name}": _get(
            "a topology: figures, components, graph, errors",
            _json("the topology", _TOPOLOGY),
            [_NAME],
            _NOT_FOUND,
        ),
        "/api/v1/topology/{name}/component/{component}": _get(
            "a component and its tasks",
            _json("the component", _COMPONENT_PAGE),
            [_NAME, _COMPONENT],
            _NOT_FOUND,
        ),
        "/api/v1/topology/{name}/history": _get(
            "the charts' recent timeline", _json("the timeline", _HISTORY), [_NAME], _NOT_FOUND
        ),
        "/api/v1/topology/{name}/logs": _get(
            "the topology's newest log lines, oldest first",
            _json(
                "the lines",
                {
                    "type": "object",
                    "required": ["topologyId", "total", "logs"],
                    "properties": {
                        "topologyId": {"type": "string"},
                        "total": {"type": "integer"},
                        "logs": {"type": "array", "items": {"type": "string"}},
                    },
                },
            ),
            [_NAME],
            _NOT_FOUND,
        ),
        "/api/v1/topology/{name}/activate": _post("activate a topology", [_NAME]),
        "/api/v1/topology/{name}/deactivate": _post("deactivate a topology", [_NAME]),
        "/api/v1/topology/{name}/kill/{wait}": _post(
            "deactivate, wait, kill (Storm's kill)",
            [_NAME, _WAIT],
            {
                "400": _error("wait is not a number of seconds from 0 to 86400"),
                "503": _error("too many delayed kills are waiting"),
            },
        ),
        "/api/v1/topology/{name}/rebalance/{wait}": _post(
            "spread a topology over other workers or executors (Storm's rebalance)",
            [_NAME, _WAIT],
            {"400": _error("wait or an option is out of range, or names no component")},
            _REBALANCE_BODY,
        ),
        "/metrics": _get(
            "Prometheus text format, at most a second old",
            {"description": "metrics", "content": {"text/plain": {"schema": {"type": "string"}}}},
            [],
        ),
    },
}


def openapi_document() -> dict[str, Any]:
    """A copy of the document (callers may change theirs)."""
    return copy.deepcopy(_DOCUMENT)
