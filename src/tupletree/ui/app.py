"""The web view's aiohttp application: Storm UI's REST paths, Prometheus, the page.

    GET  /api/v1/topology/summary
    GET  /api/v1/topology/<name>
    GET  /api/v1/topology/<name>/component/<id>
    GET  /api/v1/topology/<name>/history          tupletree: the charts' timeline
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

Requests from web pages of other sites are refused: a POST whose ``Origin`` is not this
server is 403 (a page elsewhere cannot steer the cluster through the user's browser),
and while the service listens on a loopback address every request must name a loopback
``Host`` (a DNS-rebound name cannot read it either). Scripts (curl, the CLI) send no
``Origin`` and are unaffected.

Any other failure of a cluster call (a Spark job that ended: SparkJobFailed) is a 500
whose message is the exception's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from tupletree.errors import TopologyRebalancingError
from tupletree.ui import views
from tupletree.ui.prometheus import ClusterCollector

if TYPE_CHECKING:
    from tupletree.ui.service import UIService

log = logging.getLogger("tupletree.ui")

API = "/api/v1"
MAX_KILL_WAIT_SECS = 24 * 3600.0
MAX_TIMED_OUT_SHOWN = 50
SERVICE_KEY = web.AppKey("service", object)
STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json_error(status: int, message: str) -> web.Response:
    reason = web.Response(status=status).reason
    return web.json_response({"error": reason, "errorMessage": message}, status=status)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    service: UIService = request.app[SERVICE_KEY]  # type: ignore[assignment]
    if _loopback(service.server.host):
        host = urlsplit(f"//{request.host}").hostname or ""
        if not _loopback(host):
            return _json_error(403, f"Host {request.host!r} is not this loopback service")
    origin = request.headers.get("Origin")
    steering = request.method not in ("GET", "HEAD")
    if steering and origin is not None and urlsplit(origin).netloc != request.host:
        return _json_error(403, f"a page from {origin} may not steer this cluster")
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
        log.warning("tupletree ui: %s %s failed", request.method, request.path, exc_info=True)
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
    return request.app[SERVICE_KEY]  # type: ignore[return-value]


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
        name, info, metrics, history.rates(), cluster.errors(name), service.graph(name)
    )
    stats = getattr(cluster, "worker_stats", None)
    if stats is not None:
        page["workers"] = [{"index": i} | w for i, w in stats(name).items()]
    timed_out = getattr(cluster, "timed_out", None)
    if timed_out is not None:
        page["timedOutTrees"] = [
            views.timed_out_entry(t) for t in list(timed_out(name))[-MAX_TIMED_OUT_SHOWN:]
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
        return views.component_page(name, info, cid, metrics, rates, cluster.errors(name))

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
        body = await request.json() if request.can_read_body else {}
    except ValueError as exc:
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
    registry: CollectorRegistry = request.app[REGISTRY_KEY]  # type: ignore[assignment]
    body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, registry)
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return response


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


REGISTRY_KEY = web.AppKey("registry", object)


def make_app(service: UIService) -> web.Application:
    app = web.Application(middlewares=[_guard], client_max_size=64 * 1024)
    app[SERVICE_KEY] = service
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(service.cluster))
    app[REGISTRY_KEY] = registry
    r = app.router
    r.add_get(f"{API}/topology/summary", summary)
    r.add_get(f"{API}/topology/{{name}}", topology)
    r.add_get(f"{API}/topology/{{name}}/component/{{component}}", component)
    r.add_get(f"{API}/topology/{{name}}/history", history)
    r.add_post(f"{API}/topology/{{name}}/activate", activate)
    r.add_post(f"{API}/topology/{{name}}/deactivate", deactivate)
    r.add_post(f"{API}/topology/{{name}}/kill/{{wait}}", kill)
    r.add_post(f"{API}/topology/{{name}}/rebalance/{{wait}}", rebalance)
    r.add_get("/metrics", metrics)
    r.add_get("/", _static("index.html"))
    for name in ("app.js", "style.css"):
        r.add_get(f"/static/{name}", _static(name))
    return app
