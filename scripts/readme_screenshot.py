"""Take the web page's screenshot (docs/web-annotate.png: the README, docs/web.md) with a real
bundle.

    .venv/bin/python scripts/readme_screenshot.py BUNDLE [--out docs/web-annotate.png]

A throw-away install in a temporary directory (SQLite, the embedded broker) imports and serves
BUNDLE; Debian's Chromium (apt-get install chromium), driven by Playwright, annotates a sample
sentence and takes the picture.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

SAMPLE = (
    "58 yo F w/ h/o HTN and type 2 diabetes. No fever; chest X-ray showed a right lower lobe "
    "infiltrate. Troponin 0.4 ng/mL. Started amoxicillin 500 mg PO three times daily for 7 "
    "days. Mother had breast cancer."
)
KEY = "readme-screenshot-admin-key-0123"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--out", default="docs/web-annotate.png")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mslm-shot-") as home:
        os.environ.update(
            {"MSLM_HOME": home, "MSLM_API_KEYS": f"{KEY}:admin", "HF_HUB_OFFLINE": "1"}
        )
        import uvicorn
        from playwright.sync_api import sync_playwright

        from api.main import create_app
        from mslm_settings import get_settings
        from store.db import session_factory
        from store.migrate import upgrade
        from store.models import import_bundle, set_active_model

        settings = get_settings()
        settings.home.mkdir(parents=True, exist_ok=True)
        settings.artifacts.mkdir(parents=True, exist_ok=True)
        upgrade(settings.sqlalchemy_url)
        with session_factory(settings.sqlalchemy_url)() as session:
            model = import_bundle(settings, session, Path(args.bundle))
            set_active_model(session, model.id)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.1)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path="/usr/bin/chromium",
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                )
                page = browser.new_page(viewport={"width": 1100, "height": 760})
                page.goto(f"http://127.0.0.1:{port}/")
                page.fill("#api-key", KEY)
                page.click("#key-form button[type=submit]")
                page.wait_for_function(
                    "() => document.getElementById('status').textContent.startsWith('Connected')"
                )
                page.fill("#text", SAMPLE)
                page.click("#run")
                page.wait_for_selector("#result mark.ent")
                page.focus("#run")
                page.keyboard.press("Tab")  # the first entity's tip, as on keyboard focus
                page.screenshot(path=args.out, full_page=True)
                browser.close()
        finally:
            server.should_exit = True
            thread.join(30)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
