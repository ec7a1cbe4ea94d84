// The demo page: a PDF page rendered by pdf.js, the canvas drawn over it with pointer events,
// everything through the canvas bridge client. Exposed as `window.demo` for the browser tests.

import { connect } from '../canvas-bridge.js';
import { drawInk } from '../ink.js';

/** CSS pixels per page point. */
const SCALE = 1.5;
const $ = (selector) => document.querySelector(selector);

const demo = {
  Canvas: null,
  events: [],          // every listener call, in order: [name, data]
  drawing: { strokes: [], texts: [] },
  documentName: null,
  page: 0,
  revision: null,
  sha256: null,
  tool: 'pen',
  color: 'black',
  selectedText: null,
  pageBitmap: null,    // the page as pdf.js rendered it, under the ink
  ready: null,
  busy: Promise.resolve(),
};
window.demo = demo;

const canvas = $('#page-canvas');
const context = canvas.getContext('2d');

function status(text) { $('#status').textContent = text; }

function log(name, data) {
  demo.events.push([name, data]);
  const item = document.createElement('li');
  item.textContent = `${name} ${JSON.stringify(data)}`.slice(0, 200);
  $('#events').appendChild(item);
}

/** Runs UI actions one after another, so ink and replies stay in order; errors go to the status line. */
function queue(action) {
  demo.busy = demo.busy.then(action).catch((error) => {
    status(`${error.code ?? 'error'}: ${error.message}`);
    log('error', { code: error.code, message: error.message });
  });
  return demo.busy;
}

function paint() {
  context.setTransform(1, 0, 0, 1, 0, 0);
  context.clearRect(0, 0, canvas.width, canvas.height);
  if (demo.pageBitmap) context.drawImage(demo.pageBitmap, 0, 0);
  context.setTransform(SCALE, 0, 0, SCALE, 0, 0);
  drawInk(context, demo.drawing, { selectedText: demo.selectedText });
}

async function refreshDrawing() {
  try {
    const drawing = await demo.Canvas.getDrawing();
    demo.drawing = { strokes: drawing.strokes, texts: drawing.texts };
  } catch (error) {
    if (error.code !== 'INVALID_STATE') throw error;   // not open: nothing to show but the page
    demo.drawing = { strokes: [], texts: [] };
  }
  paint();
}

/** Fetches the document (hash-checked by the client) and renders the page with pdf.js. */
async function loadPage() {
  const fetched = await demo.Canvas.documents.get(demo.documentName);
  demo.revision = fetched.revision;
  demo.sha256 = fetched.sha256;
  const pdf = await pdfjsLib.getDocument({ data: fetched.bytes }).promise;
  const page = await pdf.getPage(demo.page + 1);
  const viewport = page.getViewport({ scale: SCALE });
  const bitmap = document.createElement('canvas');
  bitmap.width = Math.round(viewport.width);
  bitmap.height = Math.round(viewport.height);
  await page.render({ canvasContext: bitmap.getContext('2d'), viewport }).promise;
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  demo.pageBitmap = bitmap;
  $('#revision').textContent = `${demo.documentName} revision ${fetched.revision}, sha256 ${fetched.sha256.slice(0, 12)}… ✓`;
  paint();
  return fetched;
}

function choose() {
  demo.documentName = $('#document').value;
  demo.page = Math.max(0, Number($('#page').value) - 1);
}

// MARK: drawing with pointer events

let points = null;

function pagePoint(event) {
  const box = canvas.getBoundingClientRect();
  const point = { x: (event.clientX - box.left) / SCALE, y: (event.clientY - box.top) / SCALE };
  // A pen gives real pressure; a mouse's constant 0.5 says nothing, so it is left out.
  if (event.pointerType === 'pen' || event.pointerType === 'touch') point.pressure = Math.min(1, Math.max(0, event.pressure));
  return point;
}

function eraseAt(point) {
  const mode = demo.tool === 'eraseStroke' ? 'stroke' : 'partial';
  const radius = Number($('#width').value) * 2;
  return queue(async () => { await demo.Canvas.erase({ x: point.x, y: point.y, radius, mode }); await refreshDrawing(); });
}

canvas.addEventListener('pointerdown', (event) => {
  canvas.setPointerCapture(event.pointerId);
  const point = pagePoint(event);
  if (demo.tool === 'text') {
    const words = window.prompt('Text', 'Hello');
    if (words) {
      queue(async () => {
        const result = await demo.Canvas.addText({ text: words, x: point.x, y: point.y, fontSize: 18, color: demo.color });
        demo.selectedText = result.texts - 1;
        await refreshDrawing();
      });
    }
    return;
  }
  if (demo.tool.startsWith('erase')) {
    eraseAt(point);
    points = null;
    return;
  }
  points = [point];
});

canvas.addEventListener('pointermove', (event) => {
  if (demo.tool.startsWith('erase') && event.buttons) {
    eraseAt(pagePoint(event));
    return;
  }
  if (!points) return;
  for (const sample of event.getCoalescedEvents?.() ?? [event]) points.push(pagePoint(sample));
  // The stroke so far, drawn as it will be flattened.
  paint();
  context.setTransform(SCALE, 0, 0, SCALE, 0, 0);
  drawInk(context, { strokes: [currentStroke(points)], texts: [] });
});

function currentStroke(strokePoints) {
  return { tool: demo.tool === 'highlighter' ? 'highlighter' : 'pen', color: demo.color,
    width: Number($('#width').value) * (demo.tool === 'highlighter' ? 4 : 1), points: strokePoints };
}

canvas.addEventListener('pointerup', () => {
  if (!points) return;
  const stroke = currentStroke(points);
  points = null;
  queue(async () => { await demo.Canvas.addStroke(stroke); await refreshDrawing(); });
});

// MARK: controls

for (const button of document.querySelectorAll('[data-tool]')) {
  button.addEventListener('click', () => {
    demo.tool = button.dataset.tool;
    document.querySelectorAll('[data-tool]').forEach((b) => b.classList.toggle('on', b === button));
  });
}
for (const button of document.querySelectorAll('[data-color]')) {
  button.addEventListener('click', () => {
    demo.color = button.dataset.color;
    document.querySelectorAll('[data-color]').forEach((b) => b.classList.toggle('on', b === button));
  });
}
$('#custom-color').addEventListener('input', (event) => { demo.color = event.target.value.toUpperCase(); });

function editSelected(changes) {
  if (demo.selectedText === null) return status('place or pick a text first');
  return queue(async () => { await demo.Canvas.editText(demo.selectedText, changes); await refreshDrawing(); });
}
for (const button of document.querySelectorAll('[data-nudge]')) {
  const [dx, dy] = button.dataset.nudge.split(',').map(Number);
  button.addEventListener('click', () => editSelected({ dx, dy }));
}
const fontSize = () => demo.drawing.texts[demo.selectedText]?.fontSize ?? 18;
$('#smaller').addEventListener('click', () => editSelected({ fontSize: Math.max(8, fontSize() - 2) }));
$('#larger').addEventListener('click', () => editSelected({ fontSize: Math.min(48, fontSize() + 2) }));
$('#recolor').addEventListener('click', () => editSelected({ color: demo.color }));
$('#undo').addEventListener('click', () => queue(async () => { await demo.Canvas.undo(); await refreshDrawing(); }));
$('#redo').addEventListener('click', () => queue(async () => { await demo.Canvas.redo(); await refreshDrawing(); }));

$('#open').addEventListener('click', () => queue(async () => {
  choose();
  await loadPage();
  await demo.Canvas.open({ document: demo.documentName, page: demo.page });
  await refreshDrawing();
}));
$('#minimize').addEventListener('click', () => queue(async () => { await demo.Canvas.minimize(); await refreshDrawing(); }));
$('#doubletap').addEventListener('click', () => queue(async () => { await demo.Canvas.doubleTap(); await refreshDrawing(); }));
$('#cancel').addEventListener('click', () => queue(async () => { await demo.Canvas.cancel(); await refreshDrawing(); }));
$('#submit').addEventListener('click', () => queue(async () => {
  const result = await demo.Canvas.submit();
  status(`submitted: revision ${result.document?.revision ?? '-'}`);
  demo.drawing = { strokes: [], texts: [] };
  paint();
}));

// MARK: start

demo.ready = (async () => {
  pdfjsLib.GlobalWorkerOptions.workerSrc = '/pdfjs/pdf.worker.js';
  const config = await (await fetch('/config.json')).json();
  const Canvas = await connect(config);
  demo.Canvas = Canvas;
  for (const name of ['canvasResult', 'stateChanged', 'pencilDoubleTap', 'documentSaved', 'eventsLost', 'sessionRestored']) {
    Canvas.addListener(name, (data) => log(name, data));
  }
  Canvas.addListener('stateChanged', (data) => $('#sheet').classList.toggle('closed', data.to !== 'open'));
  Canvas.addListener('connectionChanged', (data) => status(data.connected ? 'connected' : `reconnecting (${data.channel})…`));
  // A new revision of the page on show (this page's submit, or anyone's save): load it again,
  // and check that what came is what the event names.
  Canvas.addListener('documentSaved', (saved) => {
    if (saved.name !== demo.documentName) return;
    queue(async () => {
      const fetched = await loadPage();
      if (fetched.sha256 !== saved.sha256 && fetched.revision === saved.revision) {
        status(`revision ${saved.revision} does not hash to what was announced`);
      }
      log('pageReloaded', { revision: fetched.revision, sha256: fetched.sha256, matches: fetched.sha256 === saved.sha256 });
    });
  });
  const documents = await Canvas.documents.list();
  for (const entry of documents.filter((d) => !d.problem)) {
    const option = document.createElement('option');
    option.value = option.textContent = entry.name;
    $('#document').appendChild(option);
  }
  const wanted = new URLSearchParams(location.search);
  if (wanted.get('document')) $('#document').value = wanted.get('document');
  if (wanted.get('page')) $('#page').value = wanted.get('page');
  choose();
  if (demo.documentName) await loadPage();
  status('connected');
})();
demo.ready.catch((error) => status(`not connected: ${error.message}`));
