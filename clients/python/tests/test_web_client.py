"""The JavaScript client's promises, in headless Chromium against a real canvasd over ws://:
long strokes never glued or lost around refusals, writes never doubled across forced
reconnects, connections let go of at once, and what a restart does to a page's drawing."""

from __future__ import annotations

import random
import time

import pytest

from web import CuttableProxy, WebServer, established, run_js, wait_for, wait_for_count


# Points of a wavy line, the same for the same (n, seed), each one different from the next.
POINTS = """
function points(n, seed) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push({x: 20 + (i * 7 + seed * 13) % 500 + (i % 3) / 8, y: 20 + ((i * 11 + seed) % 700) + (i % 5) / 16,
              pressure: ((i + seed) % 100) / 100});
  }
  return out;
}
function same(a, b) {
  return a.length === b.length && a.every((p, i) => Math.abs(p.x - b[i].x) < 1e-9 && Math.abs(p.y - b[i].y) < 1e-9
    && Math.abs((p.pressure ?? 0.5) - (b[i].pressure ?? 0.5)) < 1e-9);
}
"""


def test_strokes_of_1_to_50000_points_with_refusals_between_are_neither_glued_nor_lost(web, browser):
    browser.get(f"{web.base}/harness.html")
    outcome = run_js(browser, POINTS + """
      const Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 30000});
      const limit = Canvas.server.limits.maxPointsPerStroke;
      await Canvas.open();
      const report = [];
      let refusals = 0;
      for (const [k, n] of args.lengths.entries()) {
        // First a stroke the server refuses in its last part, after its first parts were taken:
        // a bad point near its end (a part of a piece that cannot complete).
        const bad = points(n + 1500, 1000 + k);
        bad[bad.length - 2] = {x: 'not a number', y: 1};
        let refused = null;
        const empty = (await Canvas.getDrawing()).strokes.length;
        try { await Canvas.addStroke({color: 'red', width: 2, points: bad}); } catch (error) { refused = error.code; }
        if (refused) refusals++;
        // Then the stroke that must land whole, alone, and in order.
        const good = points(n, k);
        const before = (await Canvas.getDrawing()).strokes.length;
        if (before !== empty) throw new Error(`the refused stroke of ${bad.length} points left ${before - empty} strokes`);
        const result = await Canvas.addStroke({color: 'blue', width: 3, points: good});
        const drawing = await Canvas.getDrawing();
        const added = drawing.strokes.slice(before);
        // The pieces, each within the limit, joined where they overlap, are the stroke, on the
        // ink's grid.
        const joined = added.flatMap((stroke, i) => i === 0 ? stroke.points : stroke.points.slice(1));
        report.push({n, refused, pieces: result.pieces, added: added.length,
                     withinLimit: added.every((stroke) => stroke.points.length <= limit),
                     blue: added.every((stroke) => stroke.color === 'blue'),
                     whole: same(joined, bridge.onInkGrid(good))});
        await Canvas.cancel();   // a fresh drawing: the next stroke has the whole maxPointsPerDrawing
        await Canvas.open();
      }
      await Canvas.close();
      return {limit, refusals, report};
    """, url=web.url, events=web.events, lengths=[1, 2, 3, 700, 2500, 9999, 10000, 10001, 12000, 20000, 50000])
    limit = outcome["limit"]
    assert limit == 10000
    assert outcome["refusals"] == len(outcome["report"])
    for row in outcome["report"]:
        n = row["n"]
        expected_pieces = 1 if n <= limit else -(-(n - 1) // (limit - 1))
        assert row["refused"] == "INVALID_PARAMS", row
        assert row == {"n": n, "refused": "INVALID_PARAMS", "pieces": expected_pieces, "added": expected_pieces,
                       "withinLimit": True, "blue": True, "whole": True}, row


def test_writes_are_never_doubled_over_100_forced_reconnects(web, browser):
    proxy = CuttableProxy(web.ws_port)
    browser.get(f"{web.base}/harness.html")
    run_js(browser, """
      window.Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 60000});
      window.saves = [];
      window.failures = [];
      window.stop = false;
      (async () => {
        for (let i = 0; !window.stop; i++) {
          try {
            let summary;
            if (i % 2 === 0) {
              summary = await Canvas.documents.flatten('notes.pdf', 0,
                {strokes: [{tool: 'pen', color: 'black', width: 1, points: [{x: 10 + i % 400, y: 10}, {x: 12 + i % 400, y: 30}]}]});
            } else {
              await Canvas.open({document: 'notes.pdf', page: 1});
              await Canvas.addStroke({points: [{x: 10 + i % 400, y: 100}, {x: 12 + i % 400, y: 130}]});
              summary = (await Canvas.submit()).document;
            }
            saves.push(summary.revision);
          } catch (error) {
            failures.push({i, code: error.code, message: error.message});
            try { await Canvas.cancel(); } catch (_) { /* not open */ }
          }
        }
        window.finished = true;
      })();
    """, url=proxy.url, events=web.events)
    cuts = 0
    rng = random.Random()
    try:
        while cuts < 100:
            time.sleep(rng.uniform(0.02, 0.25))
            if proxy.cut():
                cuts += 1
        browser.execute_script("window.stop = true;")
        wait_for(browser, "window.finished === true", timeout=90)
        saves = browser.execute_script("return window.saves")
        failures = browser.execute_script("return window.failures")
    finally:
        proxy.close()
    client = web.canvasd.client()
    try:
        current = client.call("document.info", {"name": "notes.pdf"})["revision"]
    finally:
        client.close()
    print(f"\n{len(saves)} saves, {cuts} cuts, {proxy.accepted} connections through the proxy, revision {current}")
    assert cuts == 100 and proxy.accepted > 100
    assert failures == [], failures
    # Every save the page was told of is one revision, and there is no other.
    assert len(saves) > 20
    assert saves == list(range(2, 2 + len(saves))), saves
    assert current == 1 + len(saves), (current, len(saves))


def test_close_lets_canvasd_release_both_connections_within_2_seconds(web, browser):
    browser.get(f"{web.base}/harness.html")
    run_js(browser, """
      window.Canvas = await bridge.connect({url: args.url, events: args.events});
      await Canvas.open();
    """, url=web.url, events=web.events)
    assert established(web.ws_port) == 1 and established(web.events_port) == 1
    started = time.monotonic()
    run_js(browser, "await Canvas.close();")
    assert wait_for_count(web.ws_port, 0, 2.0) == 0
    assert wait_for_count(web.events_port, 0, 2.0) == 0
    print(f"\nboth connections released {1000 * (time.monotonic() - started):.0f} ms after close() was called")


def test_a_refused_connect_closes_what_it_opened(tmp_path, browser):
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789\n")
    web = WebServer(tmp_path, ["--web-tokens", str(tokens)])
    try:
        browser.get(f"{web.base}/harness.html")
        code = run_js(browser, """
          try { await bridge.connect({url: args.url, events: args.events, token: 'wrong-token-0123456789'}); }
          catch (error) { return error.code; }
          return null;
        """, url=web.url, events=web.events)
        assert code == "UNAUTHORIZED"
        assert wait_for_count(web.ws_port, 0, 2.0) == 0
        assert wait_for_count(web.events_port, 0, 2.0) == 0
        # And nothing comes back by itself: no reconnects of a client the page never got.
        time.sleep(1.0)
        assert established(web.ws_port) == 0 and established(web.events_port) == 0
    finally:
        web.stop()


def test_a_call_made_while_canvasd_restarts_says_the_session_was_lost(web, browser):
    browser.get(f"{web.base}/harness.html")
    run_js(browser, """
      window.Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 20000});
      window.restored = [];
      Canvas.addListener('sessionRestored', (report) => restored.push(report));
      await Canvas.open();
      await Canvas.addStroke({points: [{x: 10, y: 10}, {x: 40, y: 40}]});
      window.firstSession = Canvas.session;
    """, url=web.url, events=web.events)
    web.canvasd.stop()
    wait_for(browser, "!Canvas.requests.connected")
    browser.execute_script("""
      window.during = Canvas.getDrawing().then((d) => ({ok: d.strokes.length}), (e) => ({code: e.code, data: e.data}));
    """)
    time.sleep(0.3)
    web.canvasd = web.start_canvasd()
    outcome = run_js(browser, "return await window.during;")
    assert outcome["code"] == "SESSION_LOST", outcome
    assert outcome["data"]["session"] == browser.execute_script("return window.firstSession")
    report = wait_for(browser, "window.restored.length && window.restored[0]", timeout=20)
    assert report["sessionLost"] is True and report["lost"]["strokes"] == 1
    assert outcome["data"]["newSession"] == report["session"]


def test_replay_gives_the_page_its_drawing_again_after_a_restart_and_submit_saves_it(web, browser):
    browser.get(f"{web.base}/harness.html")
    before = run_js(browser, POINTS + """
      window.Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 20000, restore: 'replay'});
      window.restored = [];
      Canvas.addListener('sessionRestored', (report) => restored.push(report));
      await Canvas.open({document: 'notes.pdf', page: 1});
      await Canvas.addStroke({color: 'red', points: points(30, 1)});
      await Canvas.addStroke({color: 'blue', width: 5, points: points(12000, 2)});
      await Canvas.addText({text: 'kept', x: 100, y: 200, fontSize: 20});
      await Canvas.addText({text: 'moved', x: 100, y: 300});
      await Canvas.moveText(1, {x: 150, y: 320});
      await Canvas.addStroke({points: points(5, 3)});
      await Canvas.undo();
      await Canvas.minimize();
      window.firstSession = Canvas.session;
      await Canvas.open();
      const drawing = await Canvas.getDrawing();
      await Canvas.minimize();
      return drawing;
    """, url=web.url, events=web.events)
    web.canvasd.stop()
    wait_for(browser, "!Canvas.requests.connected")
    # Issued while canvasd is down: answered in the new session, with the drawing replayed.
    browser.execute_script("window.during = Canvas.state().then((s) => s.state, (e) => e.code);")
    time.sleep(0.3)
    web.canvasd = web.start_canvasd()
    assert run_js(browser, "return await window.during;") == "minimized"
    report = wait_for(browser, "window.restored.length && window.restored[0]", timeout=20)
    assert report["sessionLost"] is True and report["session"] != browser.execute_script("return window.firstSession")
    assert report["replayed"]["error"] is None
    assert report["replayed"]["strokes"] == 3 and report["replayed"]["texts"] == 2
    assert report["replayed"]["state"] == "minimized"
    after = run_js(browser, """
      await Canvas.open();
      const drawing = await Canvas.getDrawing();
      const result = await Canvas.submit();
      return {drawing, document: result.document};
    """)
    assert after["drawing"] == before
    assert after["document"]["revision"] == 2
