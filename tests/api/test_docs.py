"""/docs and /redoc need no other host, and the OpenAPI document declares the bearer credential."""

from __future__ import annotations

import re

from tests.api_client import Api


async def test_the_docs_pages_load_only_from_the_api(api: Api) -> None:
    for page, script in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        answer = await api.key.get(page)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        # Every script, style sheet and font comes from this server.
        assert not re.search(r"(src|href)=['\"]?(https?:)?//", answer.text), answer.text
        assert f"/docs-assets/{script}" in answer.text
        asset = await api.key.get(f"/docs-assets/{script}")
        assert asset.status_code == 200
        assert asset.headers["content-type"].startswith("text/javascript")
        assert len(asset.content) > 100_000
    assert (await api.key.get("/docs-assets/swagger-ui.css")).status_code == 200
    assert b"cdn.redoc.ly" not in (await api.key.get("/docs-assets/redoc.standalone.js")).content
    assert (await api.key.get("/docs-assets/nothing.js")).status_code == 404


async def test_the_document_declares_bearer_auth_on_the_v1_routes(api: Api) -> None:
    document = (await api.key.get("/openapi.json")).json()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`swb_ak_...`) or a session token (`swb_st_...`)",
    }
    assert document["security"] == [{"bearer": []}]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert "security" not in document["paths"]["/v1/sessions"]["post"]
    assert "/docs" not in document["paths"]


async def test_the_sdk_and_the_pages_scripts_are_served_and_nothing_else_is(api: Api) -> None:
    pages = (
        "/pages/console.js",
        "/pages/demo.js",
        "/pages/transcript.js",
        "/pages/inbox.js",
        "/pages/input-form.js",
        "/pages/sign-ins.js",
        "/pages/timeline.js",
        "/pages/timeline-view.js",
    )
    for path in ("/sdk/switchboard.js", "/sdk/page-tools.js", "/sdk/input-requests.js", *pages):
        answer = await api.key.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("text/javascript")
    for path, words in (
        (
            "/pages/console.html",
            "no page file console.html; there are console.js, demo.js, transcript.js, inbox.js, input-form.js,"
            " sign-ins.js, timeline.js, timeline-view.js",
        ),
        ("/pages/..%2Fapp.py", "no route /pages/../app.py"),
        ("/sdk/transcript.js", "no SDK file transcript.js"),
    ):
        answer = await api.key.get(path)
        assert answer.status_code == 404, path
        assert words in answer.json()["error"]["message"]
