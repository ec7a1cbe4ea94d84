"""The demo page as a person uses it, in headless Chromium against a real canvasd: the page on
screen is the page saved, ink only while the canvas is open, texts edited in place, and plain
messages for a document that is not there, a page out of range and a server that is down. Pages
are counted from 0 everywhere, as the protocol's `page` is."""

from __future__ import annotations


import pytest

from images import new_dark_pixels, render_page
from test_web_browser import drag, open_demo, scale_of
from web import wait_for


def text_of(browser, element_id: str) -> str:
    return browser.find_element("id", element_id).text


def set_page(browser, page: int) -> None:
    field = browser.find_element("id", "page")
    field.clear()
    field.send_keys(str(page))


def test_changing_page_while_open_asks_first_and_submit_saves_the_page_that_was_shown(web, browser):
    open_demo(browser, web, page=1)
    drag(browser, [(100, 400), (250, 400), (400, 400)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    before = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    set_page(browser, 2)
    browser.find_element("id", "open").click()
    wait_for(browser, "document.querySelector('#ask').open")
    question = text_of(browser, "ask-text")
    assert "notes.pdf, page 1 " in question and "notes.pdf, page 2 " in question, question
    choices = [b.get_attribute("data-choice") for b in browser.find_elements("css selector", "#ask-choices button")]
    assert choices == ["submit", "minimize", "cancel", "stay"]
    browser.find_element("css selector", '#ask-choices [data-choice="submit"]').click()
    wait_for(browser, "demo.state === 'open' && demo.target && demo.target.page === 2 && demo.view.page === 2")
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 2"
    # The ink went into page 1, which was on screen when it was drawn; pages 0 and 2 are untouched.
    after = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    ink = new_dark_pixels(before[1], after[1])
    assert ink and all(abs(y - 400) < 6 for _, y in ink), ink[:5]
    assert new_dark_pixels(before[0], after[0]) == [] and new_dark_pixels(before[2], after[2]) == []
    # The new canvas on page 2 starts empty, and page 2 is what is shown.
    assert browser.execute_script("return demo.drawing.strokes.length") == 0
    assert browser.execute_script("return document.querySelector('#page').value") == "2"


def test_stay_keeps_the_canvas_and_the_page_and_minimize_shows_its_state(web, browser):
    open_demo(browser, web, page=0)
    drag(browser, [(100, 300), (300, 300)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    set_page(browser, 1)
    browser.find_element("id", "open").click()
    wait_for(browser, "document.querySelector('#ask').open")
    browser.find_element("css selector", '#ask-choices [data-choice="stay"]').click()
    wait_for(browser, "!document.querySelector('#ask').open")
    assert browser.execute_script("return [demo.state, demo.view.page, document.querySelector('#page').value]") == ["open", 0, "0"]
    browser.find_element("id", "minimize").click()
    wait_for(browser, "demo.state === 'minimized'")
    assert text_of(browser, "state") == "Canvas minimized on notes.pdf, page 0"
    assert "double-tap or Open" in text_of(browser, "sheet-note")
    # While minimized, ink is not drawn: a drag sends nothing and says why.
    drag(browser, [(100, 500), (300, 500)])
    wait_for(browser, "document.querySelector('#status').textContent.includes('minimized')")
    browser.find_element("id", "doubletap").click()
    wait_for(browser, "demo.state === 'open'")
    wait_for(browser, "demo.drawing.strokes.length === 1")


def test_ink_is_drawn_only_while_the_canvas_is_open(web, browser):
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=0")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    assert text_of(browser, "state") == "Canvas closed"
    drag(browser, [(100, 300), (200, 300), (300, 300)], color_button="red")
    wait_for(browser, "document.querySelector('#status').textContent.includes('Open the canvas')")
    # Nothing red on the page, and nothing reached the server.
    from images import decode_png
    _, _, rows = decode_png(browser.get_screenshot_as_png())
    box, scale = browser.find_element("id", "page-canvas").rect, scale_of(browser)
    red = [rows[int(box["y"] + 300 * scale)][int(box["x"] + x * scale)] for x in range(110, 300, 10)]
    assert not any(r > 180 and g < 80 and b < 80 for r, g, b in red), red
    assert browser.execute_script("return demo.events.filter(([n]) => n === 'error').length") == 0


def test_any_text_is_edited_in_place(web, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    open_demo(browser, web, page=0)
    browser.find_element("css selector", '[data-tool="text"]').click()
    canvas = browser.find_element("id", "page-canvas")
    box, scale = canvas.rect, scale_of(browser)

    def click_at(x, y):
        ActionChains(browser).move_to_element_with_offset(canvas, x * scale - box["width"] / 2, y * scale - box["height"] / 2).click().perform()

    for (x, y, words) in [(100, 200, "first"), (100, 400, "second")]:
        click_at(x, y)
        wait_for(browser, "!document.querySelector('#text-editor').hidden")
        editor = browser.find_element("id", "text-editor")
        editor.send_keys(words)
        editor.send_keys(Keys.ENTER)
        wait_for(browser, f"demo.drawing.texts.some((t) => t.text === '{words}')")
    # The first one, not the last placed: click on it and retype it.
    click_at(110, 208)
    wait_for(browser, "!document.querySelector('#text-editor').hidden")
    editor = browser.find_element("id", "text-editor")
    assert editor.get_attribute("value") == "first"
    editor.send_keys(Keys.CONTROL, "a")
    editor.send_keys("changed")
    editor.send_keys(Keys.ENTER)
    wait_for(browser, "demo.drawing.texts[0].text === 'changed'")
    texts = browser.execute_script("return demo.drawing.texts")
    assert [t["text"] for t in texts] == ["changed", "second"]
    # Where they were placed (a click lands within a CSS pixel, 2/3 pt), and not moved by the edit.
    assert all(abs(t["x"] - 100) < 1 and abs(t["y"] - y) < 1 for t, y in zip(texts, (200, 400))), texts


def test_unknown_documents_and_pages_out_of_range_say_so(web, browser):
    browser.get(f"{web.base}/demo/?document=missing.pdf")
    wait_for(browser, "document.querySelector('#status').dataset.kind === 'error'")
    assert "no document named “missing.pdf”" in text_of(browser, "status")
    assert browser.find_element("id", "open").get_attribute("disabled") is not None
    # Pages count from 0, as the protocol's do: notes.pdf's three are 0, 1 and 2.
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=3")
    wait_for(browser, "document.querySelector('#status').dataset.kind === 'error'")
    assert "notes.pdf has 3 pages (0 to 2): there is no page 3." in text_of(browser, "status")


def test_a_server_that_is_down_is_said_and_retried_by_the_page(web, browser):
    web.canvasd.stop()
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=0")
    wait_for(browser, "document.querySelector('#status').textContent.includes('not reachable')", timeout=15)
    assert browser.find_element("id", "open").get_attribute("disabled") is not None
    web.canvasd = web.start_canvasd()
    wait_for(browser, "window.demo && !!window.demo.pageBitmap", timeout=30)
    assert text_of(browser, "status") == ""
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.state === 'open'")


def test_a_restart_of_canvasd_keeps_the_pages_ink_and_submit_saves_it(web, browser):
    open_demo(browser, web, page=0)
    drag(browser, [(100, 250), (250, 250), (400, 250)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    before = browser.execute_script("return demo.drawing")
    page = render_page(web.canvasd.documents / "notes.pdf", 0)
    web.restart_canvasd(pause=0.5)
    wait_for(browser, "document.querySelector('#status').textContent.includes('sent to it again')", timeout=30)
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 0"
    wait_for(browser, "demo.drawing.strokes.length === 1")
    assert browser.execute_script("return demo.drawing") == before
    browser.find_element("id", "submit").click()
    wait_for(browser, "demo.state === 'closed' && document.querySelector('#status').textContent.startsWith('Saved')")
    ink = new_dark_pixels(page, render_page(web.canvasd.documents / "notes.pdf", 0))
    assert ink and all(abs(y - 250) < 4 for _, y in ink), ink[:5]


def test_reopen_page_ink_shows_saved_strokes_to_erase_and_the_submit_takes_one_off_the_page(web, browser):
    """canvas/1.8: the demo's "Reopen page ink" brings the ink saved on a page back as strokes
    (recorded handwriting, submitted from Python), one is erased with the stroke eraser, and the
    submit leaves the page without it, in the PDF and in the page the demo shows again."""
    from canvasbridge import CanvasClient
    from images import decode_png
    from test_reopen import DARK, darkest_near, exactly, handwriting, inked_share, lone_points
    pdf = web.canvasd.documents / "notes.pdf"
    blank = render_page(pdf, 0, 150)
    strokes = handwriting(0, 5)
    victim = 2
    kept = strokes[:victim] + strokes[victim + 1:]
    # Where only the erased word's ink can be: far from the other words and off the page's own ink.
    lone = [p for p in lone_points(strokes[victim], kept, margin=10) if darkest_near(blank, p["x"], p["y"], 2.0) >= DARK]
    assert len(lone) > 20
    with CanvasClient(web.canvasd.endpoint) as client:
        writer = client.open_session()
        writer.open(document="notes.pdf", page=0)
        for stroke in strokes:
            writer.call("drawing.addStroke", stroke)
        assert writer.submit()["document"]["revision"] == 2
    inked = render_page(pdf, 0, 150)
    assert sum(darkest_near(inked, p["x"], p["y"], 1.0) < DARK for p in lone) > 0.8 * len(lone)

    def screen_dark(points, reach=1.5):
        """How many of the page points have dark pixels within `reach` points on the demo's canvas."""
        _, _, rows = decode_png(browser.get_screenshot_as_png())
        box, scale = browser.find_element("id", "page-canvas").rect, scale_of(browser)
        found = 0
        for p in points:
            cx, cy, r = box["x"] + p["x"] * scale, box["y"] + p["y"] * scale, int(reach * scale) + 1
            if any(sum(rows[y][x]) / 3 < DARK for y in range(int(cy) - r, int(cy) + r + 1) for x in range(int(cx) - r, int(cx) + r + 1)):
                found += 1
        return found

    browser.get(f"{web.base}/demo/?document=notes.pdf&page=0")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    # The page as saved shows the word, in its own ink.
    assert screen_dark(lone) > 0.8 * len(lone)
    browser.find_element("id", "reopen").click()
    wait_for(browser, "demo.state === 'open' && demo.drawing.strokes.length === 5 && demo.underInk")
    assert browser.execute_script("return demo.reopened") == {"document": "notes.pdf", "page": 0, "edits": 1, "strokes": 5, "texts": 0}
    problem = exactly(browser.execute_script("return demo.drawing.strokes"), strokes)
    assert problem is None, problem
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 0 (its ink reopened)"
    assert "Reopened 5 strokes and 0 texts from 1 piece of saved ink" in text_of(browser, "status")
    assert "revision 1 (as first stored" in text_of(browser, "revision")
    assert screen_dark(lone) > 0.8 * len(lone), "the reopened word is not drawn"
    # The stroke eraser, pressed once on the word.
    browser.find_element("css selector", '[data-tool="eraseStroke"]').click()
    at = lone[len(lone) // 2]
    drag(browser, [(at["x"], at["y"])])
    wait_for(browser, "demo.drawing.strokes.length === 4")
    problem = exactly(browser.execute_script("return demo.drawing.strokes"), kept)
    assert problem is None, problem
    # Gone from the screen at once: the page under the strokes is the one without saved ink.
    assert screen_dark(lone) == 0
    browser.find_element("id", "submit").click()
    reloaded = wait_for(browser, "demo.events.find(([name, data]) => name === 'pageReloaded' && data.revision === 3)")
    assert reloaded[1]["matches"] is True
    wait_for(browser, "demo.state === 'closed' && !demo.underInk && document.querySelector('#status').textContent.startsWith('Saved')")
    assert text_of(browser, "state") == "Canvas closed"
    # The page saved and shown again: the word is gone, the others are there once.
    after = render_page(pdf, 0, 150)
    assert [p for p in lone if darkest_near(after, p["x"], p["y"], 2.0) < DARK] == []
    assert all(inked_share(after, stroke) > 0.8 for stroke in kept)
    assert screen_dark(lone) == 0
    assert all(screen_dark(stroke["points"][::10]) > 0.8 * len(stroke["points"][::10]) for stroke in kept)
    with CanvasClient(web.canvasd.endpoint) as client:
        again = client.open_session()
        assert again.open(document="notes.pdf", page=0, reopen=True)["reopened"] == {"edits": 1, "strokes": 4, "texts": 0}
        problem = exactly(again.get_drawing()["strokes"], kept)
        assert problem is None, problem


def test_reopen_onto_a_drawing_of_its_own_asks_first(web, browser):
    open_demo(browser, web, page=0)
    drag(browser, [(100, 300), (250, 300)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    browser.find_element("id", "reopen").click()
    wait_for(browser, "document.querySelector('#ask').open")
    assert "drawing of its own" in text_of(browser, "ask-text") and "reopened" in text_of(browser, "ask-text")
    choices = [b.get_attribute("data-choice") for b in browser.find_elements("css selector", "#ask-choices button")]
    assert choices == ["submit", "cancel", "stay"]
    # Submitted first, the stroke is saved ink, and comes back reopened.
    browser.find_element("css selector", '#ask-choices [data-choice="submit"]').click()
    wait_for(browser, "demo.state === 'open' && demo.reopened && demo.reopened.edits === 1")
    wait_for(browser, "demo.drawing.strokes.length === 1")
    # Cancelled, the page keeps its ink and is shown as it is.
    browser.find_element("id", "cancel").click()
    wait_for(browser, "demo.state === 'closed' && !demo.underInk")
    assert "keeps its ink" in text_of(browser, "status")


def test_a_submit_whose_reopened_ink_another_save_changed_says_so_and_keeps_the_drawing(web, browser):
    from canvasbridge import CanvasClient
    from test_reopen import handwriting
    with CanvasClient(web.canvasd.endpoint) as client:
        writer = client.open_session()
        writer.open(document="notes.pdf", page=0)
        for stroke in handwriting(0, 3):
            writer.call("drawing.addStroke", stroke)
        writer.submit()
        browser.get(f"{web.base}/demo/?document=notes.pdf&page=0")
        wait_for(browser, "window.demo && !!window.demo.pageBitmap")
        browser.find_element("id", "reopen").click()
        wait_for(browser, "demo.state === 'open' && demo.drawing.strokes.length === 3")
        drag(browser, [(100, 600), (250, 610)])
        wait_for(browser, "demo.drawing.strokes.length === 4")
        # Meanwhile another session reopens the page and takes its ink off.
        other = client.open_session()
        other.open(document="notes.pdf", page=0, reopen=True)
        other.clear()
        assert other.submit()["document"]["revision"] == 3
    browser.find_element("id", "submit").click()
    wait_for(browser, "document.querySelector('#status').dataset.kind === 'error'")
    assert "Another save changed this page's ink" in text_of(browser, "status")
    assert browser.execute_script("return [demo.state, demo.drawing.strokes.length]") == ["open", 4]
    browser.find_element("id", "cancel").click()
    wait_for(browser, "demo.state === 'closed' && !demo.underInk")


# MARK: what a newcomer met first (issue 44): the icon, the swatches' names, pages from 0, whole
# events, and one screen at 1400x1100.

# Records the JSON frame of every request the page sends, as it leaves for canvasd: the client
# sends from a worker (worker-socket.js), or a plain WebSocket when it cannot start one. Each
# ZWS message is a flags byte and a frame; a request's JSON is its last frame.
RECORD_REQUESTS = """
window.sentRequests = [];
const record = (bytes) => {
  if (!(bytes instanceof Uint8Array) || bytes[1] !== 0x7b) return;   // '{'
  try { window.sentRequests.push(JSON.parse(new TextDecoder().decode(bytes.subarray(1)))); } catch (_) {}
};
const post = Worker.prototype.postMessage;
Worker.prototype.postMessage = function (message, ...rest) {
  if (message && Array.isArray(message.send)) message.send.forEach(record);
  return post.call(this, message, ...rest);
};
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) { record(data); return send.call(this, data); };
"""


def test_the_demo_has_an_icon_and_asks_for_no_file_that_is_not_there(web, browser):
    browser.get(f"{web.base}/demo/?document=notes.pdf")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    icon = browser.execute_script("const link = document.querySelector('link[rel~=\"icon\"]'); return link && link.href")
    assert icon and icon.startswith("data:image/svg+xml,"), icon
    # The icon is an image the browser can draw, with no request to any server.
    drawn = browser.execute_async_script("""
      const done = arguments[arguments.length - 1];
      const image = new Image();
      image.onload = () => done([image.naturalWidth, image.naturalHeight]);
      image.onerror = () => done(null);
      image.src = document.querySelector('link[rel~="icon"]').href;
    """)
    assert drawn and drawn[0] > 0 and drawn[1] > 0, drawn
    # And nothing the page asked for was missing (a 404 is logged as a failed resource).
    failed = [entry["message"] for entry in browser.get_log("browser") if "Failed to load resource" in entry["message"]]
    assert failed == [], failed
    # Without the inline icon the browser would have asked the demo's server for this: a 404.
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{web.base}/favicon.ico", timeout=5)
    assert missing.value.code == 404


def test_every_colour_swatch_has_a_name_read_aloud_and_shown(web, browser):
    open_demo(browser, web)
    swatches = browser.find_elements("css selector", "[data-color]")
    assert [s.get_attribute("data-color") for s in swatches] == ["black", "blue", "red", "purple"]
    for swatch in swatches:
        colour = swatch.get_attribute("data-color")
        assert swatch.accessible_name == colour, (colour, swatch.accessible_name)
        assert swatch.get_attribute("aria-label") == colour and swatch.get_attribute("title") == colour
        assert swatch.text == colour, swatch.text   # on the button, not only in a tooltip
    custom = browser.find_element("id", "custom-color")
    assert custom.accessible_name == "any colour"
    assert browser.find_element("css selector", ".colors label").text.strip() == "other"
    assert browser.find_element("css selector", ".colors").accessible_name == "ink colour"
    # A swatch named and chosen is the colour the stroke is drawn in.
    drag(browser, [(100, 300), (300, 300)], color_button="blue")
    strokes = wait_for(browser, "demo.drawing.strokes.length === 1 && demo.drawing.strokes")
    assert strokes[0]["color"] == "blue"


def test_pages_are_counted_from_0_as_the_protocol_counts_them(web, browser):
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_REQUESTS})
    browser.get(f"{web.base}/demo/?document=notes.pdf")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    field = browser.find_element("id", "page")
    assert field.get_attribute("value") == "0" and field.get_attribute("min") == "0" and field.get_attribute("max") == "2"
    assert "0-based" in browser.find_element("css selector", "label:has(#page)").text
    assert browser.execute_script("return demo.view") == {"document": "notes.pdf", "page": 0, "pageCount": 3}
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.state === 'open'")
    opens = browser.execute_script("return sentRequests.filter((r) => r.method === 'canvas.open')")
    assert len(opens) == 1 and opens[0]["params"]["page"] == 0 == int(field.get_attribute("value")), opens
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 0"
    # The last page: 2 in the field, 2 on the wire, 2 on screen, and the ink saved into page 2.
    browser.find_element("id", "cancel").click()
    wait_for(browser, "demo.state === 'closed'")
    set_page(browser, 2)
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.state === 'open' && demo.view.page === 2")
    opens = browser.execute_script("return sentRequests.filter((r) => r.method === 'canvas.open')")
    assert opens[-1]["params"]["page"] == 2 == int(field.get_attribute("value")), opens
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 2"
    before = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    drag(browser, [(100, 300), (300, 300)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    browser.find_element("id", "submit").click()
    wait_for(browser, "demo.events.some(([name, data]) => name === 'pageReloaded' && data.revision === 2)")
    after = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    assert new_dark_pixels(before[2], after[2]) and not new_dark_pixels(before[0], after[0])
    # The address counts from 0 too.
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=1")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    assert browser.find_element("id", "page").get_attribute("value") == "1"
    assert browser.execute_script("return demo.view.page") == 1


def test_the_events_panel_shows_each_event_whole(web, browser):
    # A document named as people name them: its documentSaved event is over 200 characters.
    import shutil
    name = "minutes of the planning meeting, second draft.pdf"
    shutil.copy(web.canvasd.documents / "notes.pdf", web.canvasd.documents / name)
    browser.get(f"{web.base}/demo/?document={name}")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.state === 'open'")
    drag(browser, [(100, 300), (300, 300)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    browser.find_element("id", "submit").click()
    wait_for(browser, "demo.events.some(([name]) => name === 'pageReloaded')")
    shown = browser.execute_script("""
      return [...document.querySelectorAll('#events li')].map((item) => {
        const code = item.querySelector('code');
        return {text: item.textContent, wraps: code.scrollWidth <= code.clientWidth};
      });
    """)
    events = browser.execute_script("return demo.events.map(([name, data]) => `${name} ${JSON.stringify(data)}`)")
    assert [item["text"] for item in shown] == events
    # The old panel cut every line at 200 characters: a saved document's event is longer.
    saved = [text for text in events if text.startswith("documentSaved ")]
    assert len(saved) == 1 and len(saved[0]) > 200 and saved[0].endswith("}"), saved
    assert f'"name":"{name}"' in saved[0] and browser.execute_script("return demo.sha256") in saved[0]
    # Wrapped in the panel's width, nothing hidden past its right edge.
    assert all(item["wraps"] for item in shown), shown
    assert browser.execute_script("return getComputedStyle(document.querySelector('#events')).overflowY") == "auto"


# What must be in sight without scrolling: the page, every control, the state, the message and
# the events.
IN_SIGHT = ["#document", "#page", "#open", "#reopen", "#minimize", "#doubletap", "#submit", "#cancel", "#state",
            "[data-tool]", "[data-color]", "#custom-color", "#width", "#undo", "#redo", "[data-nudge]", "#smaller",
            "#larger", "#recolor", "#status", "#page-canvas", "#events"]


def out_of_sight(browser, width: int, height: int):
    """The elements of IN_SIGHT whose box is not inside the window, with their boxes."""
    return browser.execute_script("""
      const [selectors, width, height] = arguments;
      const out = [];
      for (const selector of selectors) {
        for (const element of document.querySelectorAll(selector)) {
          const box = element.getBoundingClientRect();
          if (box.width === 0 || box.height === 0 || box.top < 0 || box.left < 0 || box.bottom > height || box.right > width) {
            out.push([selector, box.left, box.top, box.right, box.bottom]);
          }
        }
      }
      return out;
    """, IN_SIGHT, min(width, browser.execute_script("return innerWidth")), min(height, browser.execute_script("return innerHeight")))


def test_the_page_and_its_controls_fit_a_1400_by_1100_window(web, browser):
    browser.set_window_size(1400, 1100)
    open_demo(browser, web)
    assert browser.execute_script("return [innerWidth, innerHeight]") == [1400, 1100]
    assert out_of_sight(browser, 1400, 1100) == []
    assert browser.execute_script("return document.querySelector('#page-canvas').getBoundingClientRect().bottom") <= 1100
    assert browser.execute_script("return document.scrollingElement.scrollHeight") <= 1100
    # The page is scaled down to fit, whole, and ink drawn on it lands where it was drawn.
    scale = scale_of(browser)
    assert 1.0 <= scale < 1.5, scale
    box = browser.find_element("id", "page-canvas").rect
    assert abs(box["width"] - 612 * scale) <= 1 and abs(box["height"] - 792 * scale) <= 1, box
    drag(browser, [(100 + 25 * i, 700) for i in range(13)])
    strokes = wait_for(browser, "demo.drawing.strokes.length === 1 && demo.drawing.strokes")
    xs, ys = [p["x"] for p in strokes[0]["points"]], [p["y"] for p in strokes[0]["points"]]
    assert abs(min(xs) - 100) < 1.5 and abs(max(xs) - 400) < 1.5 and all(abs(y - 700) < 1.5 for y in ys), strokes
    # A window with the room gets the full scale back, the drawing kept.
    browser.set_window_size(1400, 1400)
    wait_for(browser, "demo.scale === 1.5")
    assert out_of_sight(browser, 1400, 1400) == []
    assert browser.execute_script("return demo.drawing.strokes") == strokes
