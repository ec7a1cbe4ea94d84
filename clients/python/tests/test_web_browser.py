"""The web layer in a real browser: headless Chromium, the demo page and the JavaScript client,
against a real canvasd over ws://. Ink drawn with pointer actions is looked for in the PDF as
poppler renders it, and in a screenshot."""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest

from conftest import ROOT
from images import decode_png, new_dark_pixels, render_page
from pdfs import large_pdf
from web import WebServer, run_js, wait_for

NOTES = ROOT / "samples" / "notes.pdf"
SCALE = 1.5   # the demo's CSS pixels per page point when the window has room for it (1400x1400)


def scale_of(browser) -> float:
    """The demo's CSS pixels per page point now: less than SCALE in a window too small for it."""
    return browser.execute_script("return demo.scale")


def open_demo(browser, web, page: int = 0):
    """The demo on notes.pdf's page `page` (from 0, as the protocol counts), the canvas open."""
    browser.get(f"{web.base}/demo/?document=notes.pdf&page={page}")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.events.some(([name, data]) => name === 'stateChanged' && data.to === 'open')")


def drag(browser, points, color_button: str = None):
    """A pointer drag through page points (x, y) on the demo's page canvas."""
    from selenium.webdriver.common.action_chains import ActionChains
    canvas = browser.find_element("id", "page-canvas")
    if color_button:
        browser.find_element("css selector", f'[data-color="{color_button}"]').click()
    box = canvas.rect
    scale = scale_of(browser)
    def offset(point):   # Selenium measures from the element's centre
        return point[0] * scale - box["width"] / 2, point[1] * scale - box["height"] / 2
    actions = ActionChains(browser, duration=10)
    actions.move_to_element_with_offset(canvas, *offset(points[0])).click_and_hold()
    previous = offset(points[0])
    for point in points[1:]:
        here = offset(point)
        actions.move_by_offset(round(here[0] - previous[0]), round(here[1] - previous[1]))
        previous = (previous[0] + round(here[0] - previous[0]), previous[1] + round(here[1] - previous[1]))
    actions.release().perform()


def test_a_stroke_drawn_with_the_pointer_lands_where_it_was_drawn(web, browser):
    open_demo(browser, web, page=1)
    line = [(100 + 25 * i, 400) for i in range(13)]   # (100, 400) to (400, 400) on page index 1
    drag(browser, line)
    strokes = wait_for(browser, "demo.drawing.strokes.length === 1 && demo.drawing.strokes")
    xs = [p["x"] for p in strokes[0]["points"]]
    ys = [p["y"] for p in strokes[0]["points"]]
    assert abs(min(xs) - 100) < 1.5 and abs(max(xs) - 400) < 1.5 and all(abs(y - 400) < 1.5 for y in ys)
    before = render_page(web.canvasd.documents / "notes.pdf", 1)
    browser.find_element("id", "submit").click()
    reloaded = wait_for(browser, "demo.events.find(([name]) => name === 'pageReloaded')")
    assert reloaded[1]["revision"] == 2 and reloaded[1]["matches"] is True
    after = render_page(web.canvasd.documents / "notes.pdf", 1)
    ink = new_dark_pixels(before, after)
    assert ink, "no new ink on the page"
    xs, ys = [x for x, _ in ink], [y for _, y in ink]
    assert 96 <= min(xs) <= 101 and 399 <= max(xs) <= 404, (min(xs), max(xs))
    assert 396 <= min(ys) and max(ys) <= 404, (min(ys), max(ys))
    # The other pages are as they were.
    assert render_page(web.canvasd.documents / "notes.pdf", 0)[2] == render_page(NOTES, 0)[2]


def test_double_tap_minimizes_and_reopens_with_the_same_drawing(web, browser):
    open_demo(browser, web)
    drag(browser, [(150, 150), (200, 180), (260, 150)])
    drag(browser, [(150, 250), (300, 260)], color_button="red")
    wait_for(browser, "demo.drawing.strokes.length === 2")
    before = browser.execute_script("return demo.drawing")
    browser.find_element("id", "doubletap").click()
    result = wait_for(browser, "demo.events.find(([name]) => name === 'canvasResult')")
    assert result[1]["action"] == "minimized" and result[1]["hasContent"] is True and result[1]["cause"] == "pencil"
    wait_for(browser, "demo.events.filter(([n, d]) => n === 'stateChanged' && d.to === 'minimized').length === 1")
    browser.find_element("id", "doubletap").click()
    wait_for(browser, "demo.events.filter(([n, d]) => n === 'stateChanged' && d.to === 'open').length === 2")
    wait_for(browser, "demo.drawing.strokes.length === 2")
    assert browser.execute_script("return demo.drawing") == before


def test_events_arrive_in_order(web, browser):
    browser.get(f"{web.base}/harness.html")
    events = run_js(browser, """
      const Canvas = await bridge.connect({url: args.url, events: args.events});
      const seen = [];
      for (const name of ['stateChanged', 'canvasResult', 'pencilDoubleTap', 'documentSaved']) {
        Canvas.addListener(name, (data) => seen.push([name, data.to ?? data.action ?? data.outcome ?? data.revision]));
      }
      const gaps = [];
      Canvas.addListener('eventsLost', (gap) => gaps.push(gap));
      await Canvas.open({document: 'notes.pdf', page: 0});
      await Canvas.addStroke({points: [{x: 10, y: 10}, {x: 40, y: 40}]});
      await Canvas.doubleTap();
      await Canvas.doubleTap();
      await Canvas.minimize();
      await Canvas.open();
      await Canvas.submit();
      const until = Date.now() + 3000;
      while (seen.length < 12 && Date.now() < until) await new Promise((ok) => setTimeout(ok, 20));
      return {seen, gaps};
    """, url=web.url, events=web.events)
    assert events["gaps"] == []
    assert events["seen"] == [
        ["stateChanged", "open"],
        ["stateChanged", "minimized"], ["canvasResult", "minimized"], ["pencilDoubleTap", "minimized"],
        ["stateChanged", "open"], ["pencilDoubleTap", "opened"],
        ["stateChanged", "minimized"], ["canvasResult", "minimized"],
        ["stateChanged", "open"],
        ["stateChanged", "closed"], ["canvasResult", "submitted"], ["documentSaved", 2],
    ], events["seen"]


def test_a_restarted_canvasd_is_reconnected_and_what_was_lost_is_reported(web, browser):
    browser.get(f"{web.base}/harness.html")
    run_js(browser, """
      const Canvas = await bridge.connect({url: args.url, events: args.events, timeoutMs: 20000});
      window.Canvas = Canvas;
      window.restored = [];
      window.connection = [];
      Canvas.addListener('sessionRestored', (report) => restored.push(report));
      Canvas.addListener('connectionChanged', (change) => connection.push(change));
      await Canvas.open();
      await Canvas.addStroke({points: [{x: 10, y: 10}, {x: 40, y: 40}]});
      await Canvas.addStroke({points: [{x: 50, y: 10}, {x: 90, y: 40}]});
      await Canvas.addText({text: 'kept?', x: 20, y: 60});
      window.firstSession = Canvas.session;
    """, url=web.url, events=web.events)
    web.restart_canvasd(pause=0.5)
    report = wait_for(browser, "window.restored.length && window.restored[0]", timeout=20)
    assert report["sessionLost"] is True and report["previousSession"] != report["session"]
    assert report["lost"]["strokes"] == 2 and report["lost"]["texts"] == 1 and report["lost"]["state"] == "open"
    assert any(not change["connected"] for change in browser.execute_script("return window.connection"))
    # The page carries on in its new session.
    after = run_js(browser, """
      await Canvas.open();
      await Canvas.addStroke({points: [{x: 1, y: 1}, {x: 2, y: 2}]});
      return (await Canvas.getDrawing()).strokes.length;
    """)
    assert after == 1


def test_an_oversized_stroke_and_a_large_upload_go_through_in_parts(web, browser):
    browser.get(f"{web.base}/harness.html")
    data = large_pdf(6 << 20)
    started = time.monotonic()
    result = run_js(browser, """
      const Canvas = await bridge.connect({url: args.url, events: args.events});
      await Canvas.open();
      const points = [];
      for (let i = 0; i < 9000; i++) points.push({x: 10 + i / 30, y: 100 + 50 * Math.sin(i / 100), pressure: 0.25 + (i % 50) / 100});
      const size = JSON.stringify({points}).length;
      await Canvas.addStroke({tool: 'pen', color: 'blue', width: 2, points});
      const drawing = await Canvas.getDrawing();
      let refused = null;
      try {
        await Canvas.documents.flatten('notes.pdf', 0, drawing);
      } catch (error) {
        refused = error.code;
      }
      const binary = atob(args.data);
      const bytes = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
      const progress = [];
      const summary = await Canvas.documents.upload('big.pdf', bytes, {onProgress: (p) => progress.push(p.sent)});
      const back = await Canvas.documents.get('big.pdf', {pieceBytes: 2 << 20});
      return {size, strokes: drawing.strokes.length, points: drawing.strokes[0].points.length,
              same: bridge.onInkGrid(points).every((q, i) => { const p = drawing.strokes[0].points[i];
                return p.x === q.x && p.y === q.y && p.pressure === q.pressure; }),
              refused, summary, parts: progress.length, backSha: back.sha256, backSize: back.bytes.length};
    """, url=web.url, events=web.events, data=base64.b64encode(data).decode())
    assert result["size"] > 128 * 1024
    assert result["strokes"] == 1 and result["points"] == 9000 and result["same"]
    assert result["refused"] == "TOO_LARGE_FOR_BROWSER"
    digest = hashlib.sha256(data).hexdigest()
    assert result["summary"]["sha256"] == digest and result["summary"]["revision"] == 1
    assert result["parts"] >= 6
    assert (web.canvasd.documents / "big.pdf").read_bytes() == data
    assert result["backSha"] == digest and result["backSize"] == len(data)
    assert time.monotonic() - started < 30


def test_a_gesture_split_at_the_point_limit_is_one_undo_step(web, browser):
    # 20,000 points under the default maxPointsPerStroke of 10,000: three strokes on the wire,
    # one gesture for the person who drew it, so one undo and one redo.
    browser.get(f"{web.base}/harness.html")
    result = run_js(browser, """
      const Canvas = await bridge.connect({url: args.url, events: args.events});
      await Canvas.open();
      await Canvas.addStroke({points: [{x: 1, y: 1}, {x: 5, y: 5}]});
      const points = [];
      for (let i = 0; i < 20000; i++) points.push({x: 10 + i / 40, y: 100 + 50 * Math.sin(i / 100), pressure: 0.25 + (i % 50) / 100});
      const added = await Canvas.addStroke({tool: 'pen', color: 'blue', width: 2, points});
      const undone = await Canvas.undo();
      const afterUndo = await Canvas.getDrawing();
      const redone = await Canvas.redo();
      const afterRedo = await Canvas.getDrawing();
      const expected = bridge.splitStroke(bridge.onInkGrid(points), Canvas.server.limits.maxPointsPerStroke);
      const same = expected.length === afterRedo.strokes.length - 1 && expected.every((piece, k) => {
        const got = afterRedo.strokes[k + 1].points;
        return got.length === piece.length && piece.every((p, i) => Math.abs(p.x - got[i].x) < 1e-9
          && Math.abs(p.y - got[i].y) < 1e-9 && Math.abs(p.pressure - got[i].pressure) < 1e-9);
      });
      // A gesture refused part way (a bad point in its last piece) takes back what it added
      // with one undo, and the strokes drawn before it stay.
      points[19999] = {x: 'not a number', y: 1};
      let refused = null;
      try { await Canvas.addStroke({tool: 'pen', color: 'red', width: 2, points}); } catch (error) { refused = {code: error.code, data: error.data}; }
      const afterRefusal = await Canvas.getDrawing();
      return {added, undone, undoStrokes: afterUndo.strokes.length, canRedo: afterUndo.canRedo, redone,
              redoStrokes: afterRedo.strokes.length, same, refused, refusalStrokes: afterRefusal.strokes.length,
              refusalColors: afterRefusal.strokes.map((s) => s.color)};
    """, url=web.url, events=web.events)
    assert result["added"]["pieces"] == 3 and result["added"]["strokes"] == 4, result["added"]
    assert result["undone"]["strokes"] == 1 and result["undoStrokes"] == 1 and result["canRedo"] is True
    assert result["redone"]["strokes"] == 4 and result["redoStrokes"] == 4 and result["same"]
    assert result["refused"]["code"] == "INVALID_PARAMS" and result["refused"]["data"]["piece"] == 2
    assert result["refused"]["data"]["undone"] == 1, result["refused"]
    assert result["refusalStrokes"] == 4 and result["refusalColors"] == ["black", "blue", "blue", "blue"]


def test_the_demo_shows_the_page_and_the_ink(web, browser):
    open_demo(browser, web)
    drag(browser, [(120, 300), (200, 300), (320, 300)], color_button="red")
    wait_for(browser, "demo.drawing.strokes.length === 1")
    width, height, rows = decode_png(browser.get_screenshot_as_png())
    box = browser.find_element("id", "page-canvas").rect
    def pixel(x, y):   # page point to screenshot pixel
        return rows[int(box["y"] + y * SCALE)][int(box["x"] + x * SCALE)]
    red = [pixel(x, 300) for x in range(130, 310, 10)]
    assert all(r > 180 and g < 80 and b < 80 for r, g, b in red), red
    # The page: white paper with notes.pdf's rules (grey-blue lines), outside the ink.
    column = [pixel(450, y) for y in range(100, 700)]
    assert sum(1 for r, g, b in column if r > 245 and g > 245 and b > 245) > len(column) // 2
    assert any(max(r, g, b) < 235 for r, g, b in column), "no rule lines of the page in the screenshot"
    assert pixel(400, 350) != (255, 0, 0)


def test_connect_gives_up_on_a_server_that_is_not_there(web, browser):
    browser.get(f"{web.base}/harness.html")
    outcome = run_js(browser, """
      const started = Date.now();
      try {
        await bridge.connect({url: 'ws://127.0.0.1:9', events: 'ws://127.0.0.1:9', timeoutMs: 1500});
        return {code: null};
      } catch (error) {
        return {code: error.code, method: error.method, ms: Date.now() - started};
      }
    """)
    assert outcome["code"] == "TIMEOUT" and outcome["method"] == "connect" and 1400 <= outcome["ms"] < 5000


def test_tokens_keep_web_sessions_apart(tmp_path, browser):
    tokens = tmp_path / "tokens"
    tokens.write_text("alice alice-token-0123456789\nbob bob-token-0123456789abc\n")
    web = WebServer(tmp_path, ["--web-tokens", str(tokens)])
    try:
        browser.get(f"{web.base}/harness.html")
        outcome = run_js(browser, """
          const codes = {};
          try { await bridge.connect({url: args.url, events: args.events}); } catch (e) { codes.none = e.code; }
          try { await bridge.connect({url: args.url, events: args.events, token: 'wrong-token-0123456789'}); } catch (e) { codes.wrong = e.code; }
          const alice = await bridge.connect({url: args.url, events: args.events, token: 'alice-token-0123456789'});
          const bob = await bridge.connect({url: args.url, events: args.events, token: 'bob-token-0123456789abc'});
          const bobSaw = [];
          // Bob subscribes to Alice's session: the server does not apply it.
          bob.events.subscribe(alice.session + '.');
          bob.events.onEvent = (event) => bobSaw.push(event.session);
          await new Promise((ok) => setTimeout(ok, 200));
          await alice.open();
          try { await bob.requests.call('canvas.state', {}, {session: alice.session}); } catch (e) { codes.other = e.code; }
          await new Promise((ok) => setTimeout(ok, 300));
          return {codes, bobSaw, aliceState: (await alice.state()).state};
        """, url=web.url, events=web.events)
        assert outcome["codes"] == {"none": "UNAUTHORIZED", "wrong": "UNAUTHORIZED", "other": "UNKNOWN_SESSION"}
        assert outcome["aliceState"] == "open"
        assert all(session == "documents" for session in outcome["bobSaw"]), outcome["bobSaw"]
    finally:
        web.stop()
