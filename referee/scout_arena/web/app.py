"""The Starlette app of the web pages and their JSON API, and a uvicorn server to embed it.

The app reads matches through a `WebSource`, matches in play through ``live`` (a callable
returning `LiveMatch` objects) and the ladder's referee nodes through ``nodes`` (a callable
returning one JSON object per node); it computes replays itself, through the engine, and the front
end (``static/``: one HTML page, one script, one style sheet, no build step) only draws them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..record import JSON, RecordError
from .live import LiveMatch, live_entry, live_json
from .owner import OwnerSource, owner_routes
from .replay import replay_frames
from .source import WebSource, iso_time

STATIC_DIR = Path(__file__).resolve().parent / "static"
_REPLAY_CACHE_SIZE = 64


def _int_param(request: Request, key: str) -> int | None:
    value = request.query_params.get(key)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise HTTPException(400, f"{key} must be an integer") from None


def _iso(value: object) -> str | None:
    when = (datetime.fromtimestamp(value, UTC)
            if isinstance(value, int | float) and not isinstance(value, bool) else None)
    return iso_time(when)


def node_entry(node: JSON) -> JSON:
    """One node of ``nodes()`` as /api/nodes shows it: the fields as given, plus
    ``attached_at_iso`` (``attached_at``, unix seconds, as ISO 8601 in UTC), and
    ``lost_at_iso`` for a lost node (state "lost")."""
    entry = {**node, "attached_at_iso": _iso(node.get("attached_at"))}
    if "lost_at" in node:
        entry["lost_at_iso"] = _iso(node["lost_at"])
    return entry


def create_app(source: WebSource, *, title: str | None = None,
               live: Callable[[], Sequence[LiveMatch]] | None = None,
               nodes: Callable[[], Sequence[JSON]] | None = None,
               owners: OwnerSource | None = None) -> Starlette:
    """The web app over ``source``: JSON under /api, the pages at / and /static. ``live``
    lists the matches being played (the ladder passes its referee's); it is called on the
    event loop, never from a worker thread, so each view falls between two actions.
    ``nodes`` lists the referee nodes and their load (the ladder passes its node report when
    it plays on nodes), also called on the event loop; without it /api/nodes is 404.
    ``owners`` serves the owner's endpoints (/api/owner...; the ladder's accounts), else 404."""
    cache: OrderedDict[str, JSON] = OrderedDict()
    cache_lock = threading.Lock()

    crosstable: Callable[[], JSON] | None = getattr(source, "crosstable", None)

    def info(request: Request) -> Response:
        return JSONResponse({"kind": source.kind, "live": live is not None,
                             "nodes": nodes is not None, "owners": owners is not None,
                             "crosstable": crosstable is not None,
                             "title": title or f"Scout Arena {source.kind}"})

    def leaderboard(request: Request) -> Response:
        return JSONResponse(source.leaderboard())

    def bot(request: Request) -> Response:
        profile = source.bot_profile(request.path_params["name"])
        if profile is None:
            raise HTTPException(404, "no such bot")
        return JSONResponse(profile)

    def matches(request: Request) -> Response:
        limit = _int_param(request, "limit") or 50
        bot_name = request.query_params.get("bot") or None
        return JSONResponse(source.list_matches(bot_name, _int_param(request, "table_size"),
                                                max(1, min(limit, 500))))

    def replay_view(request: Request) -> Response:
        match_id = request.path_params["match_id"]
        with cache_lock:
            hit = cache.get(match_id)
        if hit is None:
            record = source.get_record(match_id)
            if record is None:
                raise HTTPException(404, "no finished match with this id")
            try:
                hit = replay_frames(record)
            except (RecordError, KeyError, TypeError, ValueError) as exc:
                raise HTTPException(422, f"the record does not replay: {exc}") from exc
            if hit["finished"]:
                with cache_lock:
                    cache[match_id] = hit
                    while len(cache) > _REPLAY_CACHE_SIZE:
                        cache.popitem(last=False)
        return JSONResponse(hit)

    def record_view(request: Request) -> Response:
        record = source.get_record(request.path_params["match_id"])
        if record is None:
            raise HTTPException(404, "no finished match with this id")
        return JSONResponse(record)

    async def live_list(request: Request) -> Response:
        running = live() if live is not None else []
        return JSONResponse([live_entry(m) for m in running])

    async def live_view(request: Request) -> Response:
        match_id = request.path_params["match_id"]
        running = live() if live is not None else []
        match = next((m for m in running if m.match_id == match_id), None)
        if match is None:
            raise HTTPException(404, "no match with this id is being played")
        return JSONResponse(live_json(match.match_id, match.players, match.spectator_view()))

    async def node_list(request: Request) -> Response:
        if nodes is None:
            raise HTTPException(404, "this ladder plays on no referee node")
        return JSONResponse({"nodes": [node_entry(n) for n in nodes()]})

    def head_to_head(request: Request) -> Response:
        if crosstable is None:
            raise HTTPException(404, f"a {source.kind} has no crosstable")
        return JSONResponse(crosstable())

    def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")

    def favicon(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    routes = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/leaderboard", leaderboard),
        Route("/api/bots/{name}", bot),
        Route("/api/matches", matches),
        Route("/api/matches/{match_id}/replay", replay_view),
        Route("/api/matches/{match_id}/record", record_view),
        Route("/api/live", live_list),
        Route("/api/live/{match_id}", live_view),
        Route("/api/nodes", node_list),
        Route("/api/crosstable", head_to_head),
        Route("/favicon.ico", favicon),
        *(owner_routes(owners) if owners is not None else []),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that runs as one task of a loop owned by someone else: it leaves the
    process's signal handling to its owner (the owner sets ``should_exit`` to stop it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    @property
    def address(self) -> str:
        """host:port actually bound (useful with port 0), once ``started``."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                return f"{host}:{port}"
        return f"{self.config.host}:{self.config.port}"


def make_server(app: Starlette, host: str, port: int) -> EmbeddedServer:
    """A uvicorn server for ``app``; ``await server.serve()`` runs it in the current loop."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    return EmbeddedServer(config)
