// The demo page: a PDF page rendered by pdf.js, the canvas drawn over it with pointer events,
// everything through the canvas bridge client. Exposed as `window.demo` for the browser tests.
//
// What it keeps true: the page on screen is the page a submit saves into (the canvas's target);
// ink is drawn only while the canvas is open; the canvas's state is always shown; a message
// says what went wrong and goes away once something else happens. While the canvas holds a
// page's ink reopened as strokes, the page under them is the document as first stored
// (revision 1), so that a stroke erased is seen gone, not left showing in the page's own ink.

import { connect } from '../canvas-bridge.js';
import { drawInk, textBox, LINE_HEIGHT, TEXT_FONT, cssColor } from '../ink.js';

/** CSS pixels per page point, at most: less when the window has not the room (fitScale). */
const MAX_SCALE = 1.5;
const $ = (/** @type {string} */ selector) => /** @type {any} */ (document.querySelector(selector));

const demo = {
  /** @type {any} */ Canvas: null,
  /** @type {[string, any][]} */ events: [],   // every listener call, in order: [name, data]
  drawing: { strokes: [], texts: [] },
  /** The page on screen: {document, page (from 0, as the protocol's `page`), pageCount}, or null.
   * The page field, the `page` of the address and every message count from 0 as well. */
  /** @type {any} */ view: null,
  /** Where the canvas's ink goes while it is open or minimized: {document, page}, or null. */
  /** @type {any} */ target: null,
  /** The page whose ink the canvas was reopened with, and what came: {document, page, edits,
   * strokes, texts}, or null (a drawing of its own, or none). */
  /** @type {any} */ reopened: null,
  state: 'closed',
  revision: null,
  sha256: null,
  tool: 'pen',
  color: 'black',
  /** @type {number | null} */ selectedText: null,
  /** The text being edited in place: {index (null for a new one), x, y}, or null. */
  /** @type {any} */ editing: null,
  /** @type {HTMLCanvasElement | null} */ pageBitmap: null,   // the page as pdf.js rendered it, under the ink
  scale: MAX_SCALE,   // CSS pixels per page point of the page on screen, fitted to the window
  underInk: false,   // whether pageBitmap is the page as first stored, under reopened ink
  /** @type {Promise<unknown> | null} */ ready: null,
  /** @type {Promise<unknown>} */ busy: Promise.resolve(),
};
// @ts-ignore: for the tests and the console
window.demo = demo;

const canvas = $('#page-canvas');
const context = canvas.getContext('2d');
const describe = (/** @type {any} */ where) => (where ? `${where.document}, page ${where.page}` : 'no page');
const sameTarget = (/** @type {any} */ a, /** @type {any} */ b) => !!a && !!b && a.document === b.document && a.page === b.page;

// MARK: what the page says

/**
 * @param {string} text
 * @param {'info' | 'error' | 'progress'} kind
 */
function message(text, kind = 'info') {
  $('#status').textContent = text;
  $('#status').dataset.kind = kind;
}

function clearMessage() { message('', 'info'); }

/**
 * @param {string} name
 * @param {any} data
 */
function log(name, data) {
  demo.events.push([name, data]);
  // The whole of it, wrapped (demo.css): a cut JSON is no use to someone reading the protocol.
  const item = document.createElement('li');
  const label = document.createElement('b');
  label.textContent = name;
  const json = document.createElement('code');
  json.textContent = JSON.stringify(data) ?? 'undefined';
  item.append(label, ' ', json);
  const list = $('#events');
  const following = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  list.appendChild(item);
  if (following) list.scrollTop = list.scrollHeight;
}

/** The canvas's state, where its ink goes, and what can be done now. */
function showState() {
  const badge = $('#state');
  badge.dataset.state = demo.state;
  const where = demo.target ? ` on ${describe(demo.target)}` : '';
  badge.textContent = `Canvas ${demo.state}${where}${demo.reopened && demo.state !== 'closed' ? ' (its ink reopened)' : ''}`;
  const sheet = $('#sheet');
  sheet.classList.toggle('closed', demo.state === 'closed');
  sheet.classList.toggle('minimized', demo.state === 'minimized');
  let note = '';
  if (!demo.Canvas) note = '';
  else if (demo.state === 'closed') note = 'Open the canvas to draw on this page.';
  else if (demo.state === 'minimized') note = `Minimized${where}: double-tap or Open to go on drawing.`;
  else if (!sameTarget(demo.target, demo.view)) note = `The canvas is open on ${describe(demo.target)}.`;
  $('#sheet-note').textContent = note;
  const connected = !!demo.Canvas;
  $('#open').disabled = !connected || !demo.view;
  $('#reopen').disabled = !connected || !demo.view;
  $('#minimize').disabled = !connected || demo.state !== 'open';
  $('#submit').disabled = !connected || demo.state === 'closed';
  $('#cancel').disabled = !connected || demo.state === 'closed';
  $('#doubletap').disabled = !connected || (demo.state === 'closed' && !demo.view);
  for (const control of document.querySelectorAll('#tools button')) {
    /** @type {HTMLButtonElement} */ (control).disabled = demo.state !== 'open' && !(control instanceof HTMLButtonElement && control.dataset.tool);
  }
}

/**
 * Runs UI actions one after another, so ink and replies stay in order; an error becomes the
 * message, and the canvas's state is shown again.
 * @param {() => Promise<unknown>} action
 */
function queue(action) {
  demo.busy = demo.busy.then(action).catch((error) => {
    message(explain(error), 'error');
    log('error', { code: error.code, message: error.message });
  }).finally(showState);
  return demo.busy;
}

/**
 * What an error means to the person using the page.
 * @param {any} error
 */
function explain(error) {
  switch (error.code) {
    case 'NOT_FOUND': return error.data?.page !== undefined ? `There is no such page: ${error.message}` : `Not found: ${error.message}`;
    case 'CONFLICT':
      if (error.data?.reason === 'inkChanged') {
        return 'Another save changed this page\'s ink since it was reopened, so this drawing would undo it: nothing was saved and the drawing is still here. Cancel, then reopen the page\'s ink as it is now.';
      }
      if (error.data?.reason === 'notReopened') return 'The canvas holds a drawing of its own: submit or cancel it before reopening the page\'s ink.';
      return `The canvas is busy with another page: ${error.message}`;
    case 'TIMEOUT': case 'DISCONNECTED': return `canvasd did not answer (${error.message}); it is being reconnected, try again in a moment.`;
    case 'SESSION_LOST': return 'canvasd restarted and the drawing in progress was lost.';
    case 'PAYLOAD_TOO_LARGE': return `Too much ink: ${error.message}`;
    case undefined: return error.message;
    default: return `${error.code}: ${error.message}`;
  }
}

// MARK: the page and the ink

function paint() {
  context.setTransform(1, 0, 0, 1, 0, 0);
  context.clearRect(0, 0, canvas.width, canvas.height);
  if (demo.pageBitmap) context.drawImage(demo.pageBitmap, 0, 0);
  // The ink belongs to the target page: shown only over it, faded while minimized.
  if (demo.state === 'closed' || !sameTarget(demo.target, demo.view)) return;
  context.setTransform(demo.scale, 0, 0, demo.scale, 0, 0);
  context.globalAlpha = demo.state === 'minimized' ? 0.35 : 1;
  drawInk(context, /** @type {any} */ (demo.drawing), { selectedText: demo.selectedText, hiddenText: demo.editing?.index ?? null });
  context.globalAlpha = 1;
}

async function refreshDrawing() {
  if (demo.state === 'open') {
    const drawing = await demo.Canvas.getDrawing();
    demo.drawing = { strokes: drawing.strokes, texts: drawing.texts };
  } else if (demo.state === 'closed') {
    demo.drawing = { strokes: [], texts: [] };
  }
  // Minimized: the server shows no drawing (drawing.get needs an open canvas); the last one stays.
  if (demo.selectedText !== null && demo.selectedText >= demo.drawing.texts.length) demo.selectedText = null;
  paint();
}

/**
 * Shows `where` ({document, page}): fetches the document (hash-checked by the client) and
 * renders the page with pdf.js. A page the document does not have is refused, and the page
 * on screen stays.
 * @param {{document: string, page: number}} where
 */
async function showPage(where) {
  // What the page said before stays once the page is shown (a "Saved" is still news).
  const said = { text: $('#status').textContent, kind: $('#status').dataset.kind };
  message(`Loading ${describe(where)}…`, 'progress');
  // Under reopened ink, the page as first stored: the page as it is draws that ink itself.
  const underInk = demo.state !== 'closed' && sameTarget(demo.reopened, where) && demo.reopened.edits > 0;
  let fetched;
  try {
    fetched = await demo.Canvas.documents.get(where.document, underInk ? { revision: 1 } : {});
  } catch (/** @type {any} */ error) {
    // Revision 1 pruned (the store keeps a few): the page as it is, its ink shown twice.
    if (!underInk || error.code !== 'NOT_FOUND') throw error;
    fetched = await demo.Canvas.documents.get(where.document);
  }
  // @ts-ignore: pdf.js is a classic script
  const pdf = await pdfjsLib.getDocument({ data: fetched.bytes }).promise;
  if (!Number.isInteger(where.page) || where.page < 0 || where.page >= pdf.numPages) {
    const pages = pdf.numPages === 1 ? '1 page (page 0)' : `${pdf.numPages} pages (0 to ${pdf.numPages - 1})`;
    throw new Error(`${where.document} has ${pages}: there is no page ${where.page}.`);
  }
  const page = await pdf.getPage(where.page + 1);   // pdf.js counts from 1
  const { bitmap, scale } = await render(page);
  shownPage = page;
  demo.view = { document: where.document, page: where.page, pageCount: pdf.numPages };
  demo.revision = fetched.revision;
  demo.sha256 = fetched.sha256;
  show(bitmap, scale);
  $('#document').value = where.document;
  $('#page').value = String(where.page);
  $('#page').max = String(pdf.numPages - 1);
  $('#revision').textContent = `${where.document} revision ${fetched.revision}${underInk ? ' (as first stored, under the reopened ink)' : ''}, sha256 ${fetched.sha256.slice(0, 12)}… ✓`;
  demo.underInk = underInk;
  if (said.kind === 'info') message(said.text);
  else clearMessage();
  paint();
  return fetched;
}

/**
 * The scale at which `page` (pdf.js's) fits the room the window leaves it, MAX_SCALE at most.
 * @param {any} page
 */
function fitScale(page) {
  const area = $('#sheet-area');
  const style = getComputedStyle(area);
  const { width, height } = page.getViewport({ scale: 1 });
  const roomX = area.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const roomY = area.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  const fits = Math.floor(Math.min(roomX / width, roomY / height) * 100) / 100;
  return Math.max(0.5, Math.min(MAX_SCALE, fits));
}

/**
 * The page rendered by pdf.js at the scale that fits.
 * @param {any} page
 */
async function render(page) {
  const scale = fitScale(page);
  const viewport = page.getViewport({ scale });
  const bitmap = document.createElement('canvas');
  bitmap.width = Math.round(viewport.width);
  bitmap.height = Math.round(viewport.height);
  await page.render({ canvasContext: bitmap.getContext('2d'), viewport }).promise;
  return { bitmap, scale };
}

/**
 * @param {HTMLCanvasElement} bitmap
 * @param {number} scale
 */
function show(bitmap, scale) {
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  demo.pageBitmap = bitmap;
  demo.scale = scale;
}

/** pdf.js's page on screen, to render again when the window changes size. */
/** @type {any} */
let shownPage = null;

function chosen() {
  return { document: $('#document').value, page: Math.round(Number($('#page').value)) };
}

/**
 * Asks which of `choices` to take, in the page's own dialog.
 * @param {string} question
 * @param {[string, string][]} choices [value, label]
 * @returns {Promise<string>}
 */
function ask(question, choices) {
  const dialog = $('#ask');
  $('#ask-text').textContent = question;
  const buttons = $('#ask-choices');
  buttons.replaceChildren();
  return new Promise((resolve) => {
    for (const [value, label] of choices) {
      const button = document.createElement('button');
      button.textContent = label;
      button.dataset.choice = value;
      button.addEventListener('click', () => { dialog.close(); resolve(value); });
      buttons.appendChild(button);
    }
    dialog.addEventListener('cancel', () => resolve('stay'), { once: true });
    dialog.showModal();
  });
}

// MARK: the canvas's life

/**
 * Opens the canvas on the page chosen; a canvas busy with another page is dealt with first.
 * With `reopen`, the page's saved ink comes back as strokes to edit (canvas/1.8), and a canvas
 * holding a drawing of its own, even on this page, is dealt with first too.
 */
async function openChosen({ reopen = false } = {}) {
  const wanted = chosen();
  if (!wanted.document) throw new Error('Choose a document first.');
  const busy = demo.state !== 'closed' && (reopen
    ? !(demo.reopened && sameTarget(demo.reopened, wanted))
    : demo.target && !sameTarget(demo.target, wanted));
  if (busy) {
    const holder = demo.target ? describe(demo.target) : 'no page';
    const choices = /** @type {[string, string][]} */ ([['submit', `Submit into ${holder}`]]);
    // A minimized drawing of its own still stands in a reopen's way: not offered then.
    if (demo.state === 'open' && !reopen) choices.push(['minimize', 'Minimize (keep it for later)']);
    choices.push(['cancel', 'Cancel the drawing'], ['stay', `Stay on ${holder}`]);
    const what = reopen ? `the ink saved on ${describe(wanted)} is reopened` : `${describe(wanted)} is opened`;
    const choice = await ask(`The canvas is ${demo.state} on ${holder} with a drawing of its own. What happens to its ink before ${what}?`, choices);
    log('asked', { choice });
    if (choice === 'stay') {
      if (!demo.target) return;
      if (!sameTarget(demo.view, demo.target)) await showPage(demo.target);
      else { $('#document').value = demo.target.document; $('#page').value = String(demo.target.page); }
      return;
    }
    if (choice === 'minimize') {
      await settle(demo.Canvas.minimize());
      await showPage(wanted);
      message(`The canvas stays minimized on ${describe(demo.target)}; submit or cancel it to draw on this page.`);
      return;
    }
    await finish(choice);
  }
  if (!sameTarget(demo.view, wanted)) await showPage(wanted);
  const opened = await demo.Canvas.open({ document: wanted.document, page: wanted.page, reopen });
  demo.state = opened.state;
  demo.target = wanted;
  if (opened.reopened) demo.reopened = { ...wanted, ...opened.reopened };
  else if (reopen && !demo.reopened) {
    // A server before canvas/1.8 ignores `reopen` and opens an empty drawing.
    await refreshDrawing();
    message('This canvasd cannot reopen a page\'s ink (it speaks an older protocol): the canvas opened empty.', 'error');
    return;
  }
  if (opened.reopened) await showPage(wanted);
  await refreshDrawing();
  clearMessage();
  if (opened.reopened) {
    const { edits, strokes, texts } = opened.reopened;
    message(edits === 0
      ? `${describe(wanted)} has no saved ink to reopen: the canvas is open on it, empty.`
      : `Reopened ${strokes} stroke${strokes === 1 ? '' : 's'} and ${texts} text${texts === 1 ? '' : 's'} from ${edits} piece${edits === 1 ? '' : 's'} of saved ink: a submit replaces the page's ink with what is drawn now.`);
  }
}

/**
 * Submits or cancels, on the page that is saved into.
 * @param {string} how 'submit' or 'cancel'
 */
async function finish(how) {
  if (demo.target && !sameTarget(demo.view, demo.target)) await showPage(demo.target);
  if (how === 'submit') {
    message(`Saving into ${describe(demo.target)}…`, 'progress');
    const result = await demo.Canvas.submit();
    message(result.document ? `Saved: ${result.document.name} revision ${result.document.revision}.` : 'Submitted.');
  } else {
    await demo.Canvas.cancel();
    message(demo.reopened ? 'Cancelled: the page keeps its ink as it was.' : 'Cancelled: the ink is gone.');
  }
  demo.state = 'closed';
  demo.target = null;
  demo.reopened = null;
  demo.selectedText = null;
  // The page as it now is, its own ink included, in place of the one shown under reopened ink.
  if (demo.underInk && demo.view) await showPage(demo.view);
  await refreshDrawing();
}

/**
 * @param {Promise<any>} request minimize or a double-tap
 */
async function settle(request) {
  const result = await request;
  if (result?.state) demo.state = result.state;
  return result;
}

// MARK: drawing with pointer events

/** @type {any[] | null} */
let points = null;

/** @param {PointerEvent} event */
function pagePoint(event) {
  const box = canvas.getBoundingClientRect();
  /** @type {{x: number, y: number, pressure?: number}} */
  const point = { x: (event.clientX - box.left) / demo.scale, y: (event.clientY - box.top) / demo.scale };
  // A pen gives real pressure; a mouse's constant 0.5 says nothing, so it is left out.
  if (event.pointerType === 'pen' || event.pointerType === 'touch') point.pressure = Math.min(1, Math.max(0, event.pressure));
  return point;
}

/** Whether ink may be drawn on the page on screen now; says why not otherwise. */
function drawable() {
  if (demo.state === 'open' && sameTarget(demo.target, demo.view)) return true;
  if (demo.state === 'open') message(`The canvas is open on ${describe(demo.target)}: open this page to draw here.`);
  else if (demo.state === 'minimized') message('The canvas is minimized: double-tap or Open to go on drawing.');
  else message('Open the canvas to draw on this page.');
  return false;
}

/** @param {{x: number, y: number}} point */
function eraseAt(point) {
  const mode = demo.tool === 'eraseStroke' ? 'stroke' : 'partial';
  const radius = Number($('#width').value) * 2;
  return queue(async () => { await demo.Canvas.erase({ x: point.x, y: point.y, radius, mode }); await refreshDrawing(); });
}

/**
 * The text under `point`, by index, or null.
 * @param {{x: number, y: number}} point
 */
function textAt(point) {
  for (let index = demo.drawing.texts.length - 1; index >= 0; index--) {
    const box = textBox(context, demo.drawing.texts[index]);
    if (point.x >= box.x - 2 && point.x <= box.x + box.width + 2 && point.y >= box.y - 2 && point.y <= box.y + box.height + 2) return index;
  }
  return null;
}

canvas.addEventListener('pointerdown', (/** @type {PointerEvent} */ event) => {
  if (demo.editing) return;   // the editor's blur ends the edit first
  if (!drawable()) return;
  clearMessage();
  const point = pagePoint(event);
  if (demo.tool === 'text') {
    const index = textAt(point);
    demo.selectedText = index;
    // After this press's own default action (which moves the focus to the page), or the
    // editor would lose the focus at once.
    event.preventDefault();
    setTimeout(() => startEditing(index, point), 0);
    return;
  }
  canvas.setPointerCapture(event.pointerId);
  if (demo.tool.startsWith('erase')) {
    eraseAt(point);
    points = null;
    return;
  }
  points = [point];
});

canvas.addEventListener('pointermove', (/** @type {PointerEvent} */ event) => {
  if (demo.tool.startsWith('erase') && event.buttons && demo.state === 'open') {
    eraseAt(pagePoint(event));
    return;
  }
  if (!points) return;
  for (const sample of event.getCoalescedEvents?.() ?? [event]) points.push(pagePoint(sample));
  // The stroke so far, drawn as it will be flattened.
  paint();
  context.setTransform(demo.scale, 0, 0, demo.scale, 0, 0);
  drawInk(context, { strokes: [currentStroke(points)], texts: [] });
});

/** @param {any[]} strokePoints */
function currentStroke(strokePoints) {
  return { tool: /** @type {'pen' | 'highlighter'} */ (demo.tool === 'highlighter' ? 'highlighter' : 'pen'), color: demo.color,
    width: Number($('#width').value) * (demo.tool === 'highlighter' ? 4 : 1), points: strokePoints };
}

canvas.addEventListener('pointerup', () => {
  if (!points) return;
  const stroke = currentStroke(points);
  points = null;
  // What the server took is what stays painted: a refused stroke disappears with the refresh.
  queue(async () => {
    try { await demo.Canvas.addStroke(stroke); } finally { await refreshDrawing(); }
  });
});

// MARK: texts, edited in place

const editor = $('#text-editor');

/**
 * Opens the in-place editor on text `index`, or for a new text at `point`.
 * @param {number | null} index
 * @param {{x: number, y: number}} point
 */
function startEditing(index, point) {
  const text = index === null ? { text: '', x: point.x, y: point.y, fontSize: 18, color: demo.color } : demo.drawing.texts[index];
  demo.editing = { index, x: text.x, y: text.y, fontSize: text.fontSize, color: text.color, original: text.text };
  editor.value = text.text;
  editor.style.left = `${text.x * demo.scale}px`;
  editor.style.top = `${text.y * demo.scale}px`;
  editor.style.fontSize = `${text.fontSize * demo.scale}px`;
  editor.style.lineHeight = String(LINE_HEIGHT);
  editor.style.fontFamily = TEXT_FONT;
  editor.style.color = cssColor(text.color);
  fitEditor();
  editor.hidden = false;
  paint();
  editor.focus();
  editor.select();
}

function fitEditor() {
  const lines = editor.value.split('\n');
  editor.rows = Math.max(1, lines.length);
  editor.cols = Math.max(4, ...lines.map((/** @type {string} */ line) => line.length + 1));
}

/** @param {boolean} keep */
function stopEditing(keep) {
  const editing = demo.editing;
  if (!editing) return;
  demo.editing = null;
  editor.hidden = true;
  const words = editor.value.replace(/\s+$/, '');
  if (!keep || words === editing.original) {
    paint();
    return;
  }
  queue(async () => {
    if (editing.index === null) {
      if (!words) return;
      const result = await demo.Canvas.addText({ text: words, x: editing.x, y: editing.y, fontSize: editing.fontSize, color: editing.color });
      demo.selectedText = result.texts - 1;
    } else if (words) {
      await demo.Canvas.retext(editing.index, words);
    } else {
      message('A text cannot be empty: undo or erase removes ink, and the text was kept.');
    }
    await refreshDrawing();
  });
}

editor.addEventListener('input', fitEditor);
editor.addEventListener('keydown', (/** @type {KeyboardEvent} */ event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    stopEditing(true);
  } else if (event.key === 'Escape') {
    event.preventDefault();
    stopEditing(false);
  }
});
editor.addEventListener('blur', () => stopEditing(true));

// MARK: controls

for (const button of document.querySelectorAll('[data-tool]')) {
  button.addEventListener('click', () => {
    demo.tool = /** @type {HTMLElement} */ (button).dataset.tool ?? 'pen';
    document.querySelectorAll('[data-tool]').forEach((b) => b.classList.toggle('on', b === button));
  });
}
for (const button of document.querySelectorAll('[data-color]')) {
  button.addEventListener('click', () => {
    demo.color = /** @type {HTMLElement} */ (button).dataset.color ?? 'black';
    document.querySelectorAll('[data-color]').forEach((b) => b.classList.toggle('on', b === button));
  });
}
$('#custom-color').addEventListener('input', (/** @type {any} */ event) => { demo.color = event.target.value.toUpperCase(); });

/** @param {Record<string, unknown>} changes */
function editSelected(changes) {
  if (demo.selectedText === null) return message('Pick a text first: the Text tool, then click the text.');
  const index = demo.selectedText;
  return queue(async () => { await demo.Canvas.editText(index, changes); await refreshDrawing(); });
}
for (const button of document.querySelectorAll('[data-nudge]')) {
  const [dx, dy] = (/** @type {HTMLElement} */ (button).dataset.nudge ?? '0,0').split(',').map(Number);
  button.addEventListener('click', () => editSelected({ dx, dy }));
}
const fontSize = () => (demo.selectedText === null ? undefined : /** @type {any} */ (demo.drawing.texts[demo.selectedText])?.fontSize) ?? 18;
$('#smaller').addEventListener('click', () => editSelected({ fontSize: Math.max(8, fontSize() - 2) }));
$('#larger').addEventListener('click', () => editSelected({ fontSize: Math.min(48, fontSize() + 2) }));
$('#recolor').addEventListener('click', () => editSelected({ color: demo.color }));
$('#undo').addEventListener('click', () => queue(async () => { await demo.Canvas.undo(); await refreshDrawing(); }));
$('#redo').addEventListener('click', () => queue(async () => { await demo.Canvas.redo(); await refreshDrawing(); }));

$('#open').addEventListener('click', () => queue(() => openChosen()));
$('#reopen').addEventListener('click', () => queue(() => openChosen({ reopen: true })));
$('#minimize').addEventListener('click', () => queue(async () => { await settle(demo.Canvas.minimize()); await refreshDrawing(); }));
$('#doubletap').addEventListener('click', () => queue(async () => {
  // A double-tap on a closed canvas opens it on the page on screen, so the ink has its page.
  if (demo.state === 'closed') return openChosen();
  if (demo.state === 'minimized' && !sameTarget(demo.view, demo.target)) await showPage(demo.target);
  await settle(demo.Canvas.doubleTap());
  await refreshDrawing();
}));
$('#cancel').addEventListener('click', () => queue(() => finish('cancel')));
$('#submit').addEventListener('click', () => queue(() => finish('submit')));
$('#document').addEventListener('change', () => { $('#page').value = '0'; });

// A window of another size: the page on screen rendered again to fit it (not in mid-stroke).
/** @type {ReturnType<typeof setTimeout> | undefined} */
let resized;
window.addEventListener('resize', () => {
  clearTimeout(resized);
  resized = setTimeout(() => queue(async () => {
    const page = shownPage;
    if (!page || points || demo.editing || fitScale(page) === demo.scale) return;
    const { bitmap, scale } = await render(page);
    if (page !== shownPage) return;   // another page came meanwhile
    show(bitmap, scale);
    paint();
  }), 150);
});

// MARK: start

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Connects, and while canvasd cannot be reached says so and tries again by itself.
 * @param {any} config
 */
async function connectWhenUp(config) {
  for (let attempt = 1; ; attempt++) {
    message(attempt === 1 ? 'Connecting to canvasd…' : `Connecting to canvasd (attempt ${attempt})…`, 'progress');
    try {
      // Replay: a restart of canvasd without a session store does not cost the page its ink.
      return await connect({ ...config, timeoutMs: 5000, restore: 'replay' });
    } catch (/** @type {any} */ error) {
      if (error.code === 'UNAUTHORIZED') throw new Error('canvasd refused this page\'s access token.');
      const pause = Math.min(10, 2 * attempt);
      message(`canvasd is not reachable at ${config.url} (${error.code ?? error.message}); trying again in ${pause} s.`, 'error');
      await sleep(pause * 1000);
    }
  }
}

demo.ready = (async () => {
  // @ts-ignore: pdf.js is a classic script
  pdfjsLib.GlobalWorkerOptions.workerSrc = '/pdfjs/pdf.worker.js';
  showState();
  const config = await (await fetch('/config.json')).json();
  const Canvas = await connectWhenUp(config);
  demo.Canvas = Canvas;
  for (const name of /** @type {const} */ (['canvasResult', 'stateChanged', 'pencilDoubleTap', 'documentSaved', 'eventsLost', 'sessionRestored'])) {
    Canvas.addListener(name, (/** @type {any} */ data) => log(name, data));
  }
  // The target is the page's own: set by Open, ended by submit and cancel, or by a restart
  // that lost the drawing (a stopping canvasd may report its sessions closed first, and a
  // replay opens the canvas again on the same page).
  Canvas.addListener('stateChanged', (/** @type {any} */ data) => {
    demo.state = data.to;
    showState();
    paint();
  });
  Canvas.addListener('connectionChanged', (/** @type {any} */ data) => {
    if (!data.connected) message('The connection to canvasd was lost: reconnecting…', 'error');
    else if ($('#status').dataset.kind === 'error') message('Reconnected.');
  });
  Canvas.addListener('sessionRestored', (/** @type {any} */ report) => {
    if (report.error) return;
    if (!report.sessionLost) return clearMessage();
    if (report.replayed && !report.replayed.error) {
      message(`canvasd restarted; the drawing was sent to it again (${report.replayed.strokes} strokes, ${report.replayed.texts} texts).`);
    } else {
      message(`canvasd restarted and the drawing in progress was lost (${report.lost.strokes} strokes, ${report.lost.texts} texts).`, 'error');
      demo.state = 'closed';
      demo.target = null;
      demo.reopened = null;
    }
    queue(refreshDrawing);
  });
  // A new revision of the page on show (this page's submit, or anyone's save): load it again,
  // and check that what came is what the event names.
  Canvas.addListener('documentSaved', (/** @type {any} */ saved) => {
    if (!demo.view || saved.name !== demo.view.document) return;
    queue(async () => {
      const fetched = await showPage(demo.view);
      if (fetched.sha256 !== saved.sha256 && fetched.revision === saved.revision) {
        message(`revision ${saved.revision} does not hash to what was announced`, 'error');
      }
      log('pageReloaded', { revision: fetched.revision, sha256: fetched.sha256, matches: fetched.sha256 === saved.sha256 });
    });
  });
  const documents = (await Canvas.documents.list()).filter((/** @type {any} */ entry) => !entry.problem);
  for (const entry of documents) {
    const option = document.createElement('option');
    option.value = option.textContent = entry.name;
    $('#document').appendChild(option);
  }
  showState();
  if (documents.length === 0) {
    message('canvasd has no documents to draw on: add a PDF to its folder.', 'error');
    return;
  }
  const wanted = new URLSearchParams(location.search);
  const name = wanted.get('document') ?? documents[0].name;
  if (!documents.some((/** @type {any} */ entry) => entry.name === name)) {
    $('#document').value = '';
    message(`There is no document named “${name}”: choose one of the ${documents.length} listed.`, 'error');
    return;
  }
  const page = Math.round(Number(wanted.get('page') ?? '0'));   // from 0, as the protocol's `page`
  await queue(() => showPage({ document: name, page }));
  showState();
})();
demo.ready.catch((error) => message(`Not connected: ${error.message}`, 'error'));
