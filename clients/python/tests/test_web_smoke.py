"""The web client in headless Chromium against a real canvasd over ws://."""
from __future__ import annotations
import pytest
from web import WebServer, chromium, run_js


@pytest.fixture
def web(tmp_path):
    server = WebServer(tmp_path, ["--log-level", "debug"])
    yield server
    server.stop()


@pytest.fixture
def page(web):
    driver = chromium()
    driver.get(f"{web.base}/harness.html")
    yield driver
    driver.quit()


def test_smoke(web, page):
    result = run_js(page, """
      const Canvas = await bridge.connect({url: args.url, events: args.events});
      const seen = [];
      Canvas.addListener('stateChanged', (e) => seen.push(e.to));
      await Canvas.open();
      await Canvas.addStroke({points: [{x: 10, y: 10}, {x: 50, y: 60, pressure: 0.5}]});
      const r = await Canvas.minimize();
      await new Promise((ok) => setTimeout(ok, 200));
      return {r, seen, hello: Canvas.server.protocol};
    """, url=web.url, events=web.events)
    print(result); print((web.folder / "canvasd.log").read_text())
    assert result["r"]["hasContent"] is True
    assert result["seen"] == ["open", "minimized"]
