"""The web page at ``/`` and the interactive API docs at ``/docs``, both from assets shipped
inside the installed packages (no CDN: hospital networks are closed). The page talks to the
public API with the key its user types in; the server gives it nothing the API would not."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent / "static"
DOCS_ASSETS = "/docs/assets"


def _swagger_ui_assets() -> Path:
    """Swagger UI 5 (it renders OpenAPI 3.1, which FastAPI writes), as the fastapi-offline
    package ships it; only its files are used."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


def install(app: FastAPI) -> None:
    """Serve the page, its assets, and Swagger UI (create the app with ``docs_url=None``)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.mount(DOCS_ASSETS, StaticFiles(directory=_swagger_ui_assets()), name="docs-assets")
