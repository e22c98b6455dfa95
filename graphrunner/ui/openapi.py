"""The OpenAPI 3.1 document of the explorer's JSON API (`/api/openapi.json`)."""

from __future__ import annotations

from typing import Any

from graphrunner.run_status import STATUSES
from graphrunner.ui.node_stats import WINDOWS
from graphrunner.ui.schedules import SPEC_FIELDS

RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}
ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                "code": {"type": "string", "description": "permission_denied for a 403 of capabilities"},
                "node": {"type": "string"},
                "tool": {"type": ["string", "null"]},
                "capability": {"type": "string", "description": "the capability missing"},
                "missing": {"type": "array", "items": {"type": "object"}},
            },
        }
    },
}
NUMBER = {"type": ["number", "null"]}
TIMELINE = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string"},
        "status": {"type": "string"},
        "rows": {
            "type": "array",
            "description": "one per step, in transcript order; a step in progress has status null",
            "items": {
                "type": "object",
                "properties": {
                    "step": {"type": "integer"},
                    "node": {"type": ["string", "null"]},
                    "status": {"type": ["string", "null"]},
                    "started_at": {"type": ["string", "null"], "description": "the start of its final task"},
                    "start_ms": NUMBER,
                    "begun_at": {"type": ["string", "null"], "description": "when a suspended step began"},
                    "suspended_ms": NUMBER,
                    "queue_ms": NUMBER,
                    "duration_ms": NUMBER,
                    "worker": {"type": ["string", "null"]},
                    "items": {"type": ["object", "null"], "description": "a foreach step's items"},
                    "marks": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
        "start_ms": NUMBER,
        "end_ms": NUMBER,
        "records": {"type": "integer", "description": "transcript records read"},
        "more": {"type": "boolean", "description": "records after these were left out"},
        "next_after": {"type": ["string", "null"]},
    },
}
GRAPH_STATS = {
    "type": "object",
    "properties": {
        "graph_id": {"type": "string"},
        "window": {"type": "string"},
        "since": {"type": "integer", "description": "runs created at or after (epoch ms)"},
        "runs_read": {"type": "integer"},
        "runs_capped": {"type": "boolean", "description": "the window holds more runs than were read"},
        "runs_truncated": {"type": "integer", "description": "runs read only in part"},
        "records_read": {"type": "integer"},
        "nodes": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "node": {"type": "string"},
                    "steps": {"type": "integer"},
                    "errors": {"type": "integer"},
                    "failure_rate": NUMBER,
                    "p50_ms": NUMBER,
                    "p95_ms": NUMBER,
                    "max_ms": NUMBER,
                    "queue_p50_ms": NUMBER,
                    "queue_p95_ms": NUMBER,
                    "retries": {"type": "integer"},
                },
            },
        },
    },
}
ACTED = {
    "type": "object",
    "properties": {"run_id": {"type": "string"}, "status": {"type": "string", "enum": STATUSES}},
}


def _json(schema: Any, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    meaning = {
        400: "bad request (a malformed run id, filter or body)",
        401: "no valid basic-auth credentials",
        403: "a cross-site request, cookies without the page's X-XSRFToken, or (code permission_denied) "
        "a graph or capabilities beyond the login's",
        404: "no such run, graph or state key",
        409: "the run cannot do that now (finished, already running, another run with this id)",
        415: "the body is not application/json",
        421: "the Host is not localhost, a loopback IP or a --public-url host",
        422: "the graph, inputs or state patch are invalid",
        429: "too many failed logins from this client: wait Retry-After seconds",
    }
    every = (*codes, 421, 429) if 401 in codes else codes
    return {str(c): _json({"$ref": "#/components/schemas/Error"}, meaning[c]) for c in sorted(every)}


def _query(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _body(properties: dict[str, Any], required: bool = False) -> dict[str, Any]:
    """A JSON object request body with `properties`."""
    schema = {"type": "object", "properties": properties}
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _time_travel_paths() -> dict[str, Any]:
    """Forking a run after one of its steps."""
    patch = {"type": "object", "description": "merged into the state that step left"}
    return {
        "/api/runs/{run_id}/fork": {
            "post": {
                "summary": "Start a new run after a step of this one, at the node that step led to, with "
                "its state plus a patch (the login needs every capability the run carries)",
                "parameters": [RUN_ID],
                "requestBody": _body({"step": {"type": "integer"}, "state_patch": patch}, required=True),
                "responses": {"201": _json(ACTED, "the new run")}
                | _errors(400, 401, 403, 404, 409, 415, 422),
            }
        }
    }


def _schedule_paths() -> dict[str, Any]:
    """Schedules: list, add, read, and act on one (its id percent-encoded: `graph%2Fname`)."""
    sid = {
        "name": "schedule_id",
        "in": "path",
        "required": True,
        "description": "`<graph id>/<name>`, percent-encoded as one path segment",
        "schema": {"type": "string"},
    }
    spec = {name: {"description": f"as in a graph's config.schedules ({name})"} for name in SPEC_FIELDS}
    add: dict[str, Any] = {
        "graph": {"type": "string"},
        "name": {"type": "string"},
        "paused": {"type": "boolean"},
    }
    add["capabilities"] = {"type": "array", "items": {"type": "string"}, "description": "narrows the login's"}
    actions: dict[str, Any] = {}
    for action, summary in (
        ("pause", "Stop firing ticks (any login)"),
        ("resume", "Fire again from the next tick (the login needs the schedule's capabilities)"),
        ("trigger", "Start a run now (the login needs the schedule's capabilities)"),
        ("backfill", "Fire the ticks in [start, end) (the login needs the schedule's capabilities)"),
        ("remove", "Remove the schedule; its runs stay (any login)"),
    ):
        op: dict[str, Any] = {
            "summary": summary,
            "parameters": [sid],
            "responses": {"200": _json({"type": "object"}, "the schedule, or the run/ticks started")}
            | _errors(400, 401, 403, 404, 415, 422),
        }
        if action == "backfill":
            bound = {"type": ["number", "string"], "description": "epoch seconds or an ISO date-time"}
            op["requestBody"] = _body({"start": bound, "end": bound}, required=True)
        actions[f"/api/schedules/{{schedule_id}}/{action}"] = {"post": op}
    return {
        "/api/schedules": {
            "get": {
                "summary": "Every schedule: spec, next fire times, recent tick outcomes",
                "responses": {"200": _json({"type": "object"}, "the schedules")} | _errors(401),
            },
            "post": {
                "summary": "Add (or replace) a schedule; its runs carry the login's capabilities",
                "requestBody": _body({**add, **spec}, required=True),
                "responses": {"201": _json({"type": "object"}, "the schedule")}
                | _errors(400, 401, 403, 404, 415, 422),
            },
        },
        "/api/schedules/{schedule_id}": {
            "get": {
                "summary": "One schedule",
                "parameters": [sid],
                "responses": {"200": _json({"type": "object"}, "the schedule")} | _errors(401, 404),
            }
        },
        **actions,
    }


def document() -> dict[str, Any]:
    """The API described; every operation needs basic auth, actions need a JSON body."""
    runs = {
        "get": {
            "summary": "Runs, newest first",
            "parameters": [
                _query("graph", "only runs of this graph id"),
                _query("status", "only runs in this status", {"type": "string", "enum": STATUSES}),
                _query("since", "created at or after (epoch ms or ISO date-time, UTC)"),
                _query("until", "created before (epoch ms or ISO date-time, UTC)"),
                _query("limit", "runs per page, 1-1000", {"type": "integer", "default": 50}),
                _query("cursor", "the next_cursor of the previous page"),
            ],
            "responses": {"200": _json({"$ref": "#/components/schemas/RunPage"}, "a page of runs")}
            | _errors(400, 401),
        },
        "post": {
            "summary": "Submit a run; it carries the login's capabilities, and a graph needing more is "
            "refused (403 permission_denied) before it runs",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Submit"}}},
            },
            "responses": {
                "201": _json(ACTED, "a new run was created and started"),
                "202": _json(ACTED, "a new run was created and waits for its concurrency key"),
                "200": _json(ACTED, "this run id was submitted before with the same graph and inputs"),
            }
            | _errors(400, 401, 403, 404, 409, 415, 422),
        },
    }
    steps = {
        "get": {
            "summary": "A page of the run's transcript",
            "parameters": [
                RUN_ID,
                _query("after", "the next_after of the previous page"),
                _query("limit", "1-500", {"type": "integer", "default": 100}),
            ],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "properties": {
                            "steps": {"type": "array", "items": {"type": "object"}},
                            "next_after": {"type": ["string", "null"]},
                        },
                    },
                    "transcript records",
                )
            }
            | _errors(400, 401, 404),
        }
    }
    timeline = {
        "get": {
            "summary": "The run's steps in time: per step its start, queue wait, run time, worker, "
            "suspension and marks (retry backoffs, sleeps), a foreach step's items; a window of "
            "`limit` transcript records after `after`",
            "parameters": [
                RUN_ID,
                _query("after", "the next_after of the previous window (default: the first records)"),
                _query("limit", "transcript records read, 1-2000", {"type": "integer", "default": 500}),
                _query(
                    "latest",
                    "true: the run's latest records instead (the longest recent stretch within limit)",
                    {"type": "boolean", "default": False},
                ),
            ],
            "responses": {"200": _json({"$ref": "#/components/schemas/Timeline"}, "the timeline")}
            | _errors(400, 401, 404),
        }
    }
    graph_stats = {
        "get": {
            "summary": "Per-node stats (steps, p50/p95/max run time, failure rate, queue wait, retries) "
            "of the graph's runs created in the window: the most recent 500, the first 100 transcript "
            "records of each",
            "parameters": [
                {"name": "graph_id", "in": "path", "required": True, "schema": {"type": "string"}},
                _query("window", "how far back", {"type": "string", "enum": list(WINDOWS), "default": "24h"}),
            ],
            "responses": {"200": _json({"$ref": "#/components/schemas/GraphStats"}, "the stats")}
            | _errors(400, 401, 404),
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "graphrunner run explorer API", "version": "1"},
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "schemas": {
                "Error": ERROR,
                "RunSummary": {
                    "type": "object",
                    "properties": {
                        k: {"type": t}
                        for k, t in [
                            ("run_id", "string"),
                            ("graph_id", "string"),
                            ("status", "string"),
                            ("step_count", "integer"),
                            ("created_at", "integer"),
                            ("updated_at", "integer"),
                        ]
                    },
                },
                "RunPage": {
                    "type": "object",
                    "properties": {
                        "runs": {"type": "array", "items": {"$ref": "#/components/schemas/RunSummary"}},
                        "next_cursor": {"type": ["string", "null"]},
                    },
                },
                "Submit": {
                    "type": "object",
                    "required": ["graph"],
                    "properties": {
                        "graph": {
                            "type": "string",
                            "description": "a graph id on GRAPHRUNNER_GRAPH_PATH, or one in the store",
                        },
                        "inputs": {"type": "object"},
                        "run_id": {"type": "string"},
                        "concurrency_key": {"type": "string"},
                        "when_busy": {"type": "string", "enum": ["queue", "refuse"], "default": "queue"},
                        "capabilities": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "narrows the login's capabilities (GET /api/me): each entry one "
                            "of them as written, or a name without glob characters they allow",
                        },
                    },
                },
                "Timeline": TIMELINE,
                "GraphStats": GRAPH_STATS,
                "Me": {
                    "type": "object",
                    "properties": {
                        "user": {"type": ["string", "null"]},
                        "capabilities": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
        "security": [{"basic": []}],
        "paths": {
            "/api/runs": runs,
            "/api/me": {
                "get": {
                    "summary": "The login, and the capabilities the runs it submits carry",
                    "responses": {"200": _json({"$ref": "#/components/schemas/Me"}, "the login")}
                    | _errors(401),
                }
            },
            "/api/runs/{run_id}": {
                "get": {
                    "summary": "One run; state, inputs and output capped (see state_cap)",
                    "parameters": [RUN_ID],
                    "responses": {"200": _json({"type": "object"}, "the run")} | _errors(400, 401, 404),
                }
            },
            "/api/runs/{run_id}/steps": steps,
            "/api/runs/{run_id}/timeline": timeline,
            "/api/runs/{run_id}/state": {
                "get": {
                    "summary": "The whole state, or one key's value",
                    "parameters": [
                        RUN_ID,
                        _query("key", "one state key"),
                        _query("at", "the state after this step (the run's history)", {"type": "integer"}),
                    ],
                    "responses": {"200": _json({}, "the state or the value")} | _errors(400, 401, 404),
                }
            },
            "/api/runs/{run_id}/cancel": {
                "post": {
                    "summary": "Cancel the run",
                    "parameters": [RUN_ID],
                    "responses": {"200": _json(ACTED, "cancelled")} | _errors(400, 401, 403, 404, 409, 415),
                }
            },
            "/api/runs/{run_id}/resume": {
                "post": {
                    "summary": "Resume a failed, cancelled, paused or stalled run (the login needs every "
                    "capability the run carries)",
                    "parameters": [RUN_ID],
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"state_patch": {"type": "object"}},
                                }
                            }
                        },
                    },
                    "responses": {"200": _json(ACTED, "resumed")}
                    | _errors(400, 401, 403, 404, 409, 415, 422),
                }
            },
            **_time_travel_paths(),
            **_schedule_paths(),
            "/api/graphs/{graph_id}": {
                "get": {
                    "summary": "The stored versions of a graph (newest first) and its recent runs",
                    "parameters": [
                        {"name": "graph_id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {"200": _json({"type": "object"}, "the graph")} | _errors(401, 404),
                }
            },
            "/api/graph-stats/{graph_id}": graph_stats,
            "/healthcheck": {
                "get": {
                    "summary": "OK, without auth",
                    "security": [],
                    "responses": {"200": {"description": "OK"}},
                }
            },
        },
    }
