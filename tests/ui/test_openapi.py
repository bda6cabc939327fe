"""The REST API against its own OpenAPI document, with schemathesis on a live web view:
every answer has a documented status and the documented shape, no request makes it
fail (500), for the running topology's real names and for whatever schemathesis makes up
(unknown names, odd characters, out-of-range numbers)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tupletree import LocalCluster
from tupletree.ui.openapi import openapi_document

from .support import CONF, word_count

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

EXAMPLES_PER_OPERATION = 25  # bounded: the whole run takes a few seconds


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(simulate_time=True, ui_port=0) as c:
        c.submit_topology("wc", CONF, word_count(limit=30))
        c.wait_idle()
        yield c


def test_the_document_is_served_beside_the_api(cluster):
    schema = schemathesis.openapi.from_url(cluster.ui_url + "/api/v1/openapi.json")
    paths = {op.ok().path for op in schema.get_all_operations()}
    assert "/api/v1/topology/{name}/kill/{wait}" in paths and "/metrics" in paths


def test_real_names_get_the_documented_answers(cluster):
    """The running topology, one of its components, each read and steering call: each
    answer is valid against the document."""
    schema = schemathesis.openapi.from_url(cluster.ui_url + "/api/v1/openapi.json")
    params = {"name": "wc", "component": "split", "wait": 3600}
    called = []
    for result in schema.get_all_operations():
        op = result.ok()
        names = {p.name for p in op.path_parameters}
        case = op.Case(path_parameters={k: v for k, v in params.items() if k in names})
        response = case.call_and_validate()
        assert response.status_code == 200, (op.path, response.text[:300])
        called.append(op.path)
    # (schemathesis leaves out the document's own path when it loads it from there)
    assert set(called) == set(openapi_document()["paths"]) - {"/api/v1/openapi.json"}
    assert cluster.topology_info("wc")["active"] is False  # the kill's deactivate


def test_made_up_requests_get_documented_answers_and_no_500(cluster):
    """schemathesis makes up path values within the document (any text as a name,
    numbers for a wait): the service answers each with a documented status and shape."""
    schema = schemathesis.openapi.from_url(cluster.ui_url + "/api/v1/openapi.json")
    cases = 0
    for result in schema.get_all_operations():
        op = result.ok()

        @given(case=op.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case):
            nonlocal cases
            cases += 1
            case.call_and_validate()

        run()
    assert cases >= 8


def test_every_api_route_is_in_the_document():
    """A route added to the app without its entry in openapi.py fails here (views that
    other features add to the API belong in the document too)."""
    from tupletree.ui.app import make_app

    class Quiet:
        def topologies(self):
            return []

    service = type("Service", (), {"cluster": Quiet()})()
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in make_app(service).router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    documented = {
        (method, path)
        for path, operations in openapi_document()["paths"].items()
        for method in operations
    }
    api = {(m, p) for m, p in routes if p.startswith("/api/") or p == "/metrics"}
    assert api == documented
