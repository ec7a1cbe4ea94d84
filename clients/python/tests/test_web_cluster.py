"""A browser through HAProxy's ws:// frontend (deploy/haproxy-ws.cfg) to several canvasd
instances sharing sessions in Redis: real processes (redis-server, three canvasd, haproxy, the
static web server, headless Chromium) over real sockets, started by scripts/cluster.py.

The page (the JavaScript client, clients/web/canvas-bridge.js) opens a session, draws, and the
instance holding the session is killed with SIGKILL. Requests the page makes while it is down
wait in the client, which reconnects through HAProxy and sends them again with the same ids;
another instance must take the session over from Redis and answer with the drawing exactly as
acknowledged and the same seq, and a submit into the document must then land on disk with the
revision and sha256 it was acknowledged with.

One browser, so HAProxy's `balance source` (every page is 127.0.0.1 here) puts both of its
connections on one instance, and after the kill both on the same next one.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, canvasd_path
from web import chromium, free_port, run_js, start_demo_server, wait_for

sys.path.insert(0, str(ROOT / "scripts"))
from cluster import Cluster  # noqa: E402

pytestmark = pytest.mark.skipif(not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists())
                                or not shutil.which("redis-server"),
                                reason="needs haproxy and redis-server (make system-deps installs them)")

STROKES = [
    {"tool": "pen", "color": "blue", "width": 3, "points": [{"x": 72, "y": 220, "pressure": 0.5}, {"x": 200.25, "y": 250}]},
    {"tool": "highlighter", "color": "yellow", "width": 12, "points": [{"x": 80, "y": 300}, {"x": 260.5, "y": 310.75}]},
]


def test_a_browser_through_haproxy_survives_the_loss_of_its_instance(tmp_path: Path) -> None:
    import redis
    documents = tmp_path / "documents"
    documents.mkdir()
    shutil.copy(ROOT / "samples" / "notes.pdf", documents / "notes.pdf")
    started = time.monotonic()
    with Cluster(canvasd_path(), documents, tmp_path / "cluster", instances=3) as cluster:
        http_port = free_port()
        http = start_demo_server(http_port, cluster.web_endpoint, cluster.web_events)
        browser = None
        try:
            browser = chromium()
            browser.get(f"http://127.0.0.1:{http_port}/harness.html")
            before = run_js(browser, """
              const Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 20000});
              window.Canvas = Canvas;
              window.restored = [];
              window.events = [];
              Canvas.addListener('sessionRestored', (report) => restored.push(report));
              Canvas.addListener('stateChanged', (change) => events.push(change));
              await Canvas.open({document: 'notes.pdf', page: 0});
              for (const stroke of args.strokes) await Canvas.addStroke(stroke);
              await Canvas.addText({text: 'moved?', x: 90, y: 400});
              await Canvas.undo();
              return {session: Canvas.session, drawing: await Canvas.getDrawing(), state: await Canvas.state()};
            """, url=cluster.web_endpoint, events=cluster.web_events, strokes=STROKES)
            session = before["session"]
            assert [s["points"] for s in before["drawing"]["strokes"]] == [s["points"] for s in STROKES]
            assert before["drawing"]["texts"] == [] and before["drawing"]["canRedo"] is True
            assert before["state"]["state"] == "open"
            store = redis.Redis(port=cluster.redis_port)
            holder = store.hget(f"canvas:session:{{{session}}}", "holder").decode()
            victim = cluster.instance(holder)

            cluster.kill(victim)
            # Asked while the instance is gone: the client holds these, reconnects through
            # HAProxy and sends them again with the same ids.
            browser.execute_script("""
              window.after = null;
              Promise.all([Canvas.getDrawing(), Canvas.state()])
                .then(([drawing, state]) => { window.after = {drawing, state}; },
                      (error) => { window.after = {error: error.code + ': ' + error.message}; });
            """)
            after = wait_for(browser, "window.after", timeout=30)
            assert "error" not in after, after["error"]
            assert after["drawing"] == before["drawing"], "the drawing changed in the move"
            assert after["state"]["seq"] == before["state"]["seq"] and after["state"]["state"] == "open"
            new_holder = store.hget(f"canvas:session:{{{session}}}", "holder").decode()
            assert new_holder != victim.name and cluster.instance(new_holder).alive
            restored = wait_for(browser, "window.restored.length && window.restored[0]", timeout=20)
            assert restored.get("sessionLost") is False and restored["session"] == session, restored

            # The moved session saves into its document: revision 2, as on disk.
            submitted = run_js(browser, "return await Canvas.submit();")
            saved = submitted["document"]
            assert saved["name"] == "notes.pdf" and saved["revision"] == 2
            listed = run_js(browser, "return await Canvas.documents.revisions('notes.pdf');")
            kept = {r["revision"]: r["sha256"] for r in listed["revisions"]}
            assert kept.get(2) == saved["sha256"]
            assert hashlib.sha256((documents / "notes.pdf").read_bytes()).hexdigest() == saved["sha256"]
            # Submitted means closed and emptied, on the instance that holds the session now.
            assert run_js(browser, "return (await Canvas.state()).state;") == "closed"
        finally:
            if browser is not None:
                browser.quit()
            http.terminate()
            http.wait(timeout=5)
    assert time.monotonic() - started < 90
