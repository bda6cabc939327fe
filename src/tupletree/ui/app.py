"""The web view's aiohttp application: Storm UI's REST paths, Prometheus, the page.

    GET  /api/v1/topology/summary
    GET  /api/v1/topology/<name>
    GET  /api/v1/topology/<name>/component/<id>
    GET  /api/v1/topology/<name>/history          tupletree: the charts' timeline
    GET  /api/v1/topology/<name>/logs             tupletree: its workers' log lines
    POST /api/v1/topology/<name>/activate | deactivate | kill/<wait_secs>
    POST /api/v1/topology/<name>/rebalance/<wait_secs>   body: {"rebalanceOptions":
                                                   {"numWorkers": n, "executors": {...}}}
    GET  /metrics                                  Prometheus text format
    GET  /                                         the page (static files in ./static)

Errors are JSON, ``{"error": <reason>, "errorMessage": <what happened>}``, with the
status code: 404 for an unknown topology, component or path, 400 for a bad
``wait_secs`` or rebalance option, 403 for a refused request, 405 for a wrong method,
409 for a rebalance that cannot start now (one in progress, too few Spark slots).

Cluster calls can block (a Spark kill waits for its workers), so handlers run them on
the loop's thread pool, never on the loop itself.

Who may use it (``tupletree.http_guard``; docs/security.md): every request must name
this service in ``Host`` (an IP literal, localhost, this machine's names or the
service's ``allowed_hosts``: a DNS-rebound name is refused with 403, on every bind);
a request from a browser page of another origin (another site, another port of this
host) is refused with 403, whatever its method; with a ``token``, every request but
the page's own files (``/``, ``/static/...``) must carry it as ``Authorization:
Bearer <token>`` (401 without; the page takes it from its address, ``/#token=...``).
Scripts (curl, the CLI) send no ``Origin`` and are unaffected by that rule.

``/metrics`` answers from a scrape at most ``METRICS_CACHE_SECS`` old (``scrape.py``):
a storm of scrapes reads the cluster once a second, not once per scrape.

The REST API is described by an OpenAPI document at ``/api/v1/openapi.json``
(``openapi.py``); tests/ui/test_openapi.py runs schemathesis against a live service.

Any other failure of a cluster call (a Spark job that ended: SparkJobFailed) is a 500
whose message is the exception's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from tupletree.errors import TopologyRebalancingError
from tupletree.http_guard import foreign_origin, token_matches
from tupletree.log_limit import ErrorLogLimiter
from tupletree.ui import views
from tupletree.ui.openapi import openapi_document
from tupletree.ui.prometheus import ClusterCollector
from tupletree.ui.scrape import ScrapeCache
from tupletree.ui.service import UIService

log = logging.getLogger("tupletree.ui")

API = "/api/v1"
MAX_KILL_WAIT_SECS = 24 * 3600.0
MAX_TIMED_OUT_SHOWN = 50
MAX_LOG_LINES_SHOWN = 500
SERVICE_KEY = web.AppKey("service", UIService)
STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
METRICS_CACHE_SECS = 1.0
# The page's own files: no data in them, so no token needed to load the page that asks
# for it.
PUBLIC_PATHS = frozenset({"/", "/static/app.js", "/static/style.css"})


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json_error(status: int, message: str) -> web.Response:
    reason = web.Response(status=status).reason
    return web.json_response({"error": reason, "errorMessage": message}, status=status)


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    service = request.app[SERVICE_KEY]
    host = request.headers.get("Host")
    if host is not None and not service.hosts.allows(host):
        return _json_error(
            403,
            f"Host {host[:200]!r} is not a name of this service (add it to the web view's "
            "allowed_hosts if it is)",
        )
    refused = foreign_origin(request.headers, host)
    if refused is not None:
        return _json_error(403, refused)
    token = service.token
    if (
        token is not None
        and request.path not in PUBLIC_PATHS
        and not token_matches(token, request.headers.get("Authorization"))
    ):
        response = _json_error(
            401,
            "this web view needs its token: send 'Authorization: Bearer <token>' "
            "(tupletree's commands read it from TUPLETREE_UI_TOKEN), or open the page as "
            "/#token=<token>",
        )
        response.headers["WWW-Authenticate"] = 'Bearer realm="tupletree"'
        return response
    try:
        return await handler(request)
    except ApiError as exc:
        return _json_error(exc.status, str(exc))
    except web.HTTPException as exc:
        if exc.status >= 400 and request.path.startswith(API):
            return _json_error(exc.status, exc.reason)
        raise
    except Exception as exc:  # e.g. SparkJobFailed: the cluster's own words, as JSON
        if not request.path.startswith(API):
            raise
        missed = request.app[FAILURES_KEY].admit(type(exc).__name__, time.monotonic())
        if missed is not None:
            log.warning(
                "tupletree ui: %s %s failed (%d such failures not logged before)",
                request.method,
                request.path,
                missed,
                exc_info=True,
            )
        return _json_error(500, f"{type(exc).__name__}: {exc}")


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a (blocking) cluster call on the loop's thread pool; an unknown topology or
    component (KeyError, as TopologyNotFoundError is) becomes a 404, a call a rebalance
    in progress refuses a 409."""
    try:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except KeyError as exc:
        raise ApiError(404, str(exc).strip("'\"")) from None
    except TopologyRebalancingError as exc:
        raise ApiError(409, str(exc)) from None


def _service(request: web.Request) -> UIService:
    return request.app[SERVICE_KEY]


async def summary(request: web.Request) -> web.Response:
    service = _service(request)
    cluster = service.cluster

    def read() -> list[dict[str, Any]]:
        out = []
        for name in cluster.topologies():
            try:
                out.append(
                    views.summary_entry(name, cluster.topology_info(name), cluster.metrics(name))
                )
            except KeyError:
                continue  # killed meanwhile
            except Exception as exc:  # e.g. its Spark job ended: say so, list the rest
                out.append({"id": name, "name": name, "status": "FAILED", "error": str(exc)})
        return out

    return web.json_response({"topologies": await _call(read)})


def _read_topology(service: UIService, name: str) -> dict[str, Any]:
    cluster = service.cluster
    info = cluster.topology_info(name)
    metrics = cluster.metrics(name)
    history = service.history(name)
    page = views.topology_page(
        name,
        info,
        metrics,
        history.rates(),
        cluster.error_records(name),
        cluster.worker_events(name),
        service.graph(name),
        time.time(),
    )
    page["workers"] = [{"index": i, **w} for i, w in cluster.worker_stats(name).items()]
    page["timedOutTrees"] = [
        views.timed_out_entry(t) for t in cluster.timed_out(name)[-MAX_TIMED_OUT_SHOWN:]
    ]
    return page


async def topology(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return web.json_response(await _call(_read_topology, _service(request), name))


async def component(request: web.Request) -> web.Response:
    service = _service(request)
    name, cid = request.match_info["name"], request.match_info["component"]

    def read() -> dict[str, Any]:
        cluster = service.cluster
        info = cluster.topology_info(name)
        metrics = cluster.metrics(name)
        if cid not in metrics:
            raise ApiError(404, f"topology {name!r} has no component {cid!r}")
        rates = service.history(name).rates()
        records = cluster.error_records(name)
        workers = cluster.worker_stats(name)
        return views.component_page(name, info, cid, metrics, rates, records, time.time(), workers)

    return web.json_response(await _call(read))


async def history(request: web.Request) -> web.Response:
    service = _service(request)
    name = request.match_info["name"]

    def read() -> dict[str, Any]:
        service.cluster.topology_info(name)  # 404 for a topology not running
        return {
            "sampleSecs": service.sample_secs,
            "timeline": service.history(name).timeline(),
        }

    return web.json_response(await _call(read))


async def logs(request: web.Request) -> web.Response:
    """The newest MAX_LOG_LINES_SHOWN of ``cluster.logs(name)``, oldest first (where an
    error's ``errorWorkerLogLink`` points)."""
    service = _service(request)
    name = request.match_info["name"]

    def read() -> dict[str, Any]:
        lines = service.cluster.logs(name)
        return {"topologyId": name, "total": len(lines), "logs": lines[-MAX_LOG_LINES_SHOWN:]}

    return web.json_response(await _call(read))


def _operation(op: str, name: str) -> web.Response:
    return web.json_response({"topologyOperation": op, "topologyId": name, "status": "success"})


async def activate(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await _call(_service(request).cluster.activate, name)
    return _operation("activate", name)


async def deactivate(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await _call(_service(request).cluster.deactivate, name)
    return _operation("deactivate", name)


async def kill(request: web.Request) -> web.Response:
    """Storm's kill: deactivate, wait ``wait_secs``, kill. With 0 the topology is gone
    when the answer comes; otherwise the answer comes at once and the kill follows."""
    service = _service(request)
    name, wait = request.match_info["name"], _wait_secs(request.match_info["wait"])
    if wait == 0:
        await _call(service.cluster.kill_topology, name)
    else:
        try:
            await _call(service.kill_later, name, wait)
        except RuntimeError as exc:
            raise ApiError(503, str(exc)) from None
    return _operation("kill", name)


def _wait_secs(text: str) -> float:
    try:
        wait = float(text)
    except ValueError:
        wait = math.nan
    if not 0 <= wait <= MAX_KILL_WAIT_SECS:
        raise ApiError(
            400,
            f"wait_secs must be a number of seconds from 0 to {MAX_KILL_WAIT_SECS:.0f}, "
            f"got {text!r}",
        )
    return wait


async def rebalance(request: web.Request) -> web.Response:
    """Storm UI's rebalance: ``wait_secs`` in the path, ``{"rebalanceOptions":
    {"numWorkers": n, "executors": {component: n}}}`` in the body (each optional). The
    answer comes once the options are checked; the topology is REBALANCING until it
    runs on its new layout."""
    service = _service(request)
    name, wait = request.match_info["name"], _wait_secs(request.match_info["wait"])
    try:
        async with asyncio.timeout(service.server.header_timeout):
            body = await request.json() if request.can_read_body else {}
    except TimeoutError:
        response = _json_error(
            408, f"the body did not arrive within {service.server.header_timeout:g} s"
        )
        response.force_close()
        return response
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise ApiError(400, f"the body must be JSON: {exc}") from None
    options = body.get("rebalanceOptions", {}) if isinstance(body, dict) else None
    if not isinstance(options, dict):
        raise ApiError(400, 'the body must be {"rebalanceOptions": {...}}')
    workers, executors = options.get("numWorkers"), options.get("executors")
    if executors is not None and not isinstance(executors, dict):
        raise ApiError(400, f"executors must map component ids to numbers, got {executors!r}")

    def start() -> None:
        service.cluster.rebalance(name, wait, workers, executors, block=False)

    try:
        await _call(start)
    except ValueError as exc:  # a bad option: InvalidConfigError, InvalidTopologyError
        raise ApiError(400, str(exc)) from None
    except RuntimeError as exc:  # one in progress; too few Spark slots
        raise ApiError(409, str(exc)) from None
    return _operation("rebalance", name)


async def metrics(request: web.Request) -> web.Response:
    response = web.Response(body=await request.app[SCRAPE_KEY].get())
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def _static(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    suffix = name[name.rindex(".") :]
    body = resources.files("tupletree.ui").joinpath("static", name).read_bytes()

    async def serve(request: web.Request) -> web.Response:
        return web.Response(
            body=body,
            content_type=STATIC_TYPES[suffix],
            headers={"Cache-Control": "no-cache"},
        )

    return serve


REGISTRY_KEY = web.AppKey("registry", CollectorRegistry)
SCRAPE_KEY = web.AppKey("scrape", ScrapeCache)
FAILURES_KEY = web.AppKey("failures", ErrorLogLimiter)


def make_app(service: UIService) -> web.Application:
    app = web.Application(middlewares=[_guard], client_max_size=64 * 1024)
    app[SERVICE_KEY] = service
    app[FAILURES_KEY] = ErrorLogLimiter()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(service.cluster))
    app[REGISTRY_KEY] = registry
    app[SCRAPE_KEY] = ScrapeCache(lambda: generate_latest(registry), METRICS_CACHE_SECS)
    r = app.router
    r.add_get(f"{API}/openapi.json", openapi)
    r.add_get(f"{API}/topology/summary", summary)
    r.add_get(f"{API}/topology/{{name}}", topology)
    r.add_get(f"{API}/topology/{{name}}/component/{{component}}", component)
    r.add_get(f"{API}/topology/{{name}}/history", history)
    r.add_get(f"{API}/topology/{{name}}/logs", logs)
    r.add_post(f"{API}/topology/{{name}}/activate", activate)
    r.add_post(f"{API}/topology/{{name}}/deactivate", deactivate)
    r.add_post(f"{API}/topology/{{name}}/kill/{{wait}}", kill)
    r.add_post(f"{API}/topology/{{name}}/rebalance/{{wait}}", rebalance)
    r.add_get("/metrics", metrics)
    r.add_get("/", _static("index.html"))
    for name in ("app.js", "style.css"):
        r.add_get(f"/static/{name}", _static(name))
    return app
