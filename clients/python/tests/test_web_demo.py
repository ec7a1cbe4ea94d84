"""The demo page as a person uses it, in headless Chromium against a real canvasd: the page on
screen is the page saved, ink only while the canvas is open, texts edited in place, and plain
messages for a document that is not there, a page out of range and a server that is down."""

from __future__ import annotations


import pytest

from images import new_dark_pixels, render_page
from test_web_browser import SCALE, drag, open_demo
from web import wait_for


def text_of(browser, element_id: str) -> str:
    return browser.find_element("id", element_id).text


def set_page(browser, page: int) -> None:
    field = browser.find_element("id", "page")
    field.clear()
    field.send_keys(str(page))


def test_changing_page_while_open_asks_first_and_submit_saves_the_page_that_was_shown(web, browser):
    open_demo(browser, web, page=2)
    drag(browser, [(100, 400), (250, 400), (400, 400)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    before = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    set_page(browser, 3)
    browser.find_element("id", "open").click()
    wait_for(browser, "document.querySelector('#ask').open")
    question = text_of(browser, "ask-text")
    assert "page 2" in question and "page 3" in question, question
    choices = [b.get_attribute("data-choice") for b in browser.find_elements("css selector", "#ask-choices button")]
    assert choices == ["submit", "minimize", "cancel", "stay"]
    browser.find_element("css selector", '#ask-choices [data-choice="submit"]').click()
    wait_for(browser, "demo.state === 'open' && demo.target && demo.target.page === 2 && demo.view.page === 2")
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 3"
    # The ink went into page 2 (index 1), which was on screen when it was drawn; 1 and 3 are untouched.
    after = [render_page(web.canvasd.documents / "notes.pdf", page) for page in range(3)]
    ink = new_dark_pixels(before[1], after[1])
    assert ink and all(abs(y - 400) < 6 for _, y in ink), ink[:5]
    assert new_dark_pixels(before[0], after[0]) == [] and new_dark_pixels(before[2], after[2]) == []
    # The new canvas on page 3 starts empty, and page 3 is what is shown.
    assert browser.execute_script("return demo.drawing.strokes.length") == 0
    assert browser.execute_script("return document.querySelector('#page').value") == "3"


def test_stay_keeps_the_canvas_and_the_page_and_minimize_shows_its_state(web, browser):
    open_demo(browser, web, page=1)
    drag(browser, [(100, 300), (300, 300)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    set_page(browser, 2)
    browser.find_element("id", "open").click()
    wait_for(browser, "document.querySelector('#ask').open")
    browser.find_element("css selector", '#ask-choices [data-choice="stay"]').click()
    wait_for(browser, "!document.querySelector('#ask').open")
    assert browser.execute_script("return [demo.state, demo.view.page, document.querySelector('#page').value]") == ["open", 0, "1"]
    browser.find_element("id", "minimize").click()
    wait_for(browser, "demo.state === 'minimized'")
    assert text_of(browser, "state") == "Canvas minimized on notes.pdf, page 1"
    assert "double-tap or Open" in text_of(browser, "sheet-note")
    # While minimized, ink is not drawn: a drag sends nothing and says why.
    drag(browser, [(100, 500), (300, 500)])
    wait_for(browser, "document.querySelector('#status').textContent.includes('minimized')")
    browser.find_element("id", "doubletap").click()
    wait_for(browser, "demo.state === 'open'")
    wait_for(browser, "demo.drawing.strokes.length === 1")


def test_ink_is_drawn_only_while_the_canvas_is_open(web, browser):
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=1")
    wait_for(browser, "window.demo && !!window.demo.pageBitmap")
    assert text_of(browser, "state") == "Canvas closed"
    drag(browser, [(100, 300), (200, 300), (300, 300)], color_button="red")
    wait_for(browser, "document.querySelector('#status').textContent.includes('Open the canvas')")
    # Nothing red on the page, and nothing reached the server.
    from images import decode_png
    _, _, rows = decode_png(browser.get_screenshot_as_png())
    box = browser.find_element("id", "page-canvas").rect
    red = [rows[int(box["y"] + 300 * SCALE)][int(box["x"] + x * SCALE)] for x in range(110, 300, 10)]
    assert not any(r > 180 and g < 80 and b < 80 for r, g, b in red), red
    assert browser.execute_script("return demo.events.filter(([n]) => n === 'error').length") == 0


def test_any_text_is_edited_in_place(web, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    open_demo(browser, web, page=1)
    browser.find_element("css selector", '[data-tool="text"]').click()
    canvas = browser.find_element("id", "page-canvas")
    box = canvas.rect

    def click_at(x, y):
        ActionChains(browser).move_to_element_with_offset(canvas, x * SCALE - box["width"] / 2, y * SCALE - box["height"] / 2).click().perform()

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
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=7")
    wait_for(browser, "document.querySelector('#status').dataset.kind === 'error'")
    assert "notes.pdf has 3 pages: there is no page 7." in text_of(browser, "status")


def test_a_server_that_is_down_is_said_and_retried_by_the_page(web, browser):
    web.canvasd.stop()
    browser.get(f"{web.base}/demo/?document=notes.pdf&page=1")
    wait_for(browser, "document.querySelector('#status').textContent.includes('not reachable')", timeout=15)
    assert browser.find_element("id", "open").get_attribute("disabled") is not None
    web.canvasd = web.start_canvasd()
    wait_for(browser, "window.demo && !!window.demo.pageBitmap", timeout=30)
    assert text_of(browser, "status") == ""
    browser.find_element("id", "open").click()
    wait_for(browser, "demo.state === 'open'")


def test_a_restart_of_canvasd_keeps_the_pages_ink_and_submit_saves_it(web, browser):
    open_demo(browser, web, page=1)
    drag(browser, [(100, 250), (250, 250), (400, 250)])
    wait_for(browser, "demo.drawing.strokes.length === 1")
    before = browser.execute_script("return demo.drawing")
    page = render_page(web.canvasd.documents / "notes.pdf", 0)
    web.restart_canvasd(pause=0.5)
    wait_for(browser, "document.querySelector('#status').textContent.includes('sent to it again')", timeout=30)
    assert text_of(browser, "state") == "Canvas open on notes.pdf, page 1"
    wait_for(browser, "demo.drawing.strokes.length === 1")
    assert browser.execute_script("return demo.drawing") == before
    browser.find_element("id", "submit").click()
    wait_for(browser, "demo.state === 'closed' && document.querySelector('#status').textContent.startsWith('Saved')")
    ink = new_dark_pixels(page, render_page(web.canvasd.documents / "notes.pdf", 0))
    assert ink and all(abs(y - 250) < 4 for _, y in ink), ink[:5]
