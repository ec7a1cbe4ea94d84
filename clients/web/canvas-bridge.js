// canvas bridge for web pages: the canvas plugin's API (open, minimize, submit, cancel, the
// pencil double-tap, listeners) over canvasd's ws:// endpoints. Plain ES modules, no build.
//
//   import { connect } from './canvas-bridge.js';
//   const Canvas = await connect({ url: 'ws://127.0.0.1:5580', events: 'ws://127.0.0.1:5581' });
//   Canvas.addListener('canvasResult', (result) => console.log(result));
//   await Canvas.open({ document: 'notes.pdf', page: 0 });
//   await Canvas.addStroke({ points: [{ x: 72, y: 200, pressure: 0.5 }, { x: 300, y: 220 }] });
//   const result = await Canvas.submit({ imageData: true });

import { RequestChannel } from './request-channel.js';
import { EventChannel } from './event-channel.js';
import { Documents } from './documents.js';
import { CanvasError } from './errors.js';
import { MAX_FRAME_BYTES } from './zws.js';

export { CanvasError } from './errors.js';
export { MAX_FRAME_BYTES } from './zws.js';

/** Room left in a frame for the request's envelope around a stroke's points. */
const STROKE_PART_BYTES = MAX_FRAME_BYTES - 2048;

const LISTENER_EVENTS = new Set(['canvasResult', 'stateChanged', 'pencilDoubleTap', 'documentSaved',
  'connectionChanged', 'eventsLost', 'sessionRestored']);

/**
 * Connects to canvasd and opens a session. `url` and `events` are the ws:// endpoints that
 * canvasd's --web-endpoint and --web-events bind; `token` is needed when it has --web-tokens.
 * `session` holds session.open's params (transitions, pencil, resultImages, size).
 */
export async function connect({ url, events, token, timeoutMs, session = {} }) {
  const plugin = new CanvasPlugin({ url, events, token, timeoutMs, sessionParams: session });
  await plugin._start();
  return plugin;
}

export class CanvasPlugin {
  constructor({ url, events, token, timeoutMs, sessionParams }) {
    this._listeners = new Map();
    this._sessionParams = { transitions: 'instant', ...sessionParams };
    this._known = { state: 'closed', strokes: 0, texts: 0, target: null };
    this._wasDown = false;
    this.requests = new RequestChannel(url, {
      token, timeoutMs,
      onConnection: (up) => this._connectionChanged('requests', up),
    });
    this.events = new EventChannel(events, {
      token,
      onEvent: (event) => this._event(event),
      onGap: (gap) => this._emit('eventsLost', gap),
      onConnection: (up) => this._connectionChanged('events', up),
    });
    /** Document methods: list, info, revisions, get, upload, flatten, restore. */
    this.documents = new Documents(this.requests);
  }

  /** The server's `hello`: protocol, limits, methods. */
  get server() { return this._hello; }

  async _start() {
    // A server that is not there (yet) is retried in the background; connect() gives up after
    // the request timeout, so a page can say so instead of waiting for ever.
    let timer;
    const waited = this.requests.timeoutMs;
    const gaveUp = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new CanvasError('TIMEOUT', `no connection to canvasd within ${waited} ms`,
        { timeoutMs: waited, requests: this.requests.connected }, 'connect')), waited);
    });
    try {
      await Promise.race([Promise.all([this.requests.ready(), this.events.ready()]), gaveUp]);
    } catch (error) {
      this.requests.close();
      this.events.close();
      throw error;
    } finally {
      clearTimeout(timer);
    }
    this._hello = await this.requests.call('hello');
    this.events.subscribe('documents.');
    await this._openSession();
  }

  async _openSession() {
    const opened = await this.requests.call('session.open', this._sessionParams);
    if (this.session) this.events.unsubscribe(`${this.session}.`);
    this.session = opened.session;
    this._known = { state: opened.state, strokes: 0, texts: 0, target: null };
    this.events.expect(this.session, 0);
    this.events.subscribe(`${this.session}.`);
    // One round trip, so the subscription (sent on the other connection) is in place before
    // anything this session does makes an event.
    await this.call('canvas.state');
    return opened;
  }

  /** Sends any session method: resolves to its result, rejects with a CanvasError. */
  call(method, params = {}, options = {}) {
    return this.requests.call(method, params, { ...options, session: this.session }).then((result) => {
      this._track(method, params, result);
      return result;
    });
  }

  // What the page drew, as far as the replies tell: reported if the server loses the session.
  _track(method, params, result) {
    if (result && typeof result.state === 'string') this._known.state = result.state;
    if (result && typeof result.strokes === 'number') this._known.strokes = result.strokes;
    if (result && typeof result.texts === 'number') this._known.texts = result.texts;
    if (method === 'canvas.open' && params.document !== undefined) {
      this._known.target = { document: params.document, page: params.page ?? 0 };
    }
    if ((method === 'canvas.submit' || method === 'canvas.cancel') && result) {
      this._known = { ...this._known, strokes: 0, texts: 0, target: null };
    }
  }

  // MARK: the plugin

  initialize() { return this.call('canvas.initialize'); }

  /** Opens the canvas, on `page` of `document` when given (the page the ink goes to). */
  open({ document, page, size } = {}) {
    const params = {};
    if (document !== undefined) params.document = document;
    if (page !== undefined) params.page = page;
    if (size !== undefined) params.size = size;
    return this.call('canvas.open', params);
  }

  /** Resolves to a CanvasResult: {action: 'minimized', hasContent, imageData?}. */
  minimize({ imageData = false } = {}) { return this.call('canvas.minimize', { imageData }); }

  /** Resolves to a CanvasResult; with a document target also `document` {name, revision, pageCount, sha256}. */
  submit({ imageData = false } = {}) { return this.call('canvas.submit', { imageData }, { timeoutMs: 130000 }); }

  cancel({ imageData = false } = {}) { return this.call('canvas.cancel', { imageData }); }

  /** What an Apple Pencil double-tap does: opens a closed or minimized canvas, minimizes an open one. */
  doubleTap() { return this.call('pencil.doubleTap'); }

  configurePencil(pencil) { return this.call('pencil.configure', pencil); }

  finishTransition() { return this.call('canvas.finishTransition'); }

  state() { return this.call('canvas.state'); }

  /**
   * Calls `fn` for each event of `name`: canvasResult, stateChanged, pencilDoubleTap,
   * documentSaved, and the connection's own connectionChanged, eventsLost, sessionRestored.
   */
  addListener(name, fn) {
    if (!LISTENER_EVENTS.has(name)) throw new TypeError(`no event "${name}"; events: ${[...LISTENER_EVENTS].join(', ')}`);
    if (!this._listeners.has(name)) this._listeners.set(name, new Set());
    this._listeners.get(name).add(fn);
    const remove = async () => { this._listeners.get(name)?.delete(fn); };
    return { remove };
  }

  removeAllListeners() { this._listeners.clear(); }

  // MARK: drawing

  /**
   * Adds a pen or highlighter stroke. A stroke whose request would not fit one browser frame
   * goes in parts (`continued`), which the server joins into one stroke and one undo step.
   */
  async addStroke({ tool = 'pen', color = 'black', width = 3, points }) {
    if (!Array.isArray(points) || points.length === 0) {
      throw new CanvasError('INVALID_PARAMS', 'points: at least one point', { field: 'points' }, 'drawing.addStroke');
    }
    const parts = [];
    let part = [];
    let bytes = 0;
    for (const point of points) {
      const size = JSON.stringify(point).length + 1;
      if (part.length > 0 && bytes + size > STROKE_PART_BYTES) {
        parts.push(part);
        part = [];
        bytes = 0;
      }
      part.push(point);
      bytes += size;
    }
    parts.push(part);
    let result;
    for (let index = 0; index < parts.length; index++) {
      const params = { tool, color, width, points: parts[index] };
      if (index < parts.length - 1) params.continued = true;
      result = await this.call('drawing.addStroke', params);
    }
    return result;
  }

  addText({ text, x, y, fontSize = 16, color = 'black' }) {
    return this.call('drawing.addText', { text, x, y, fontSize, color });
  }

  /** Changes a placed text: any of x, y (move), dx, dy (nudge), fontSize (8 to 48), color, text. */
  editText(index, changes) { return this.call('drawing.editText', { index, ...changes }); }

  moveText(index, { x, y }) { return this.call('drawing.moveText', { index, x, y }); }

  nudgeText(index, dx, dy) { return this.editText(index, { dx, dy }); }

  resizeText(index, fontSize) { return this.editText(index, { fontSize }); }

  recolorText(index, color) { return this.editText(index, { color }); }

  retext(index, text) { return this.editText(index, { text }); }

  /** Erases around (x, y): whole strokes (`mode: 'stroke'`) or the ink under the eraser ('partial'). */
  erase({ x, y, radius = 8, mode = 'stroke' }) { return this.call('drawing.erase', { x, y, radius, mode }); }

  undo() { return this.call('drawing.undo'); }

  redo() { return this.call('drawing.redo'); }

  clear() { return this.call('drawing.clear'); }

  /** {strokes, texts, canUndo, canRedo}: exactly what was drawn. */
  getDrawing() { return this.call('drawing.get'); }

  /** Closes the session and both connections. */
  async close() {
    try { await this.call('session.close', {}, { timeoutMs: 2000 }); } catch (_) { /* closing anyway */ }
    this.requests.close();
    this.events.close();
  }

  // MARK: events and reconnects

  _emit(name, data) {
    for (const fn of this._listeners.get(name) ?? []) {
      try { fn(data); } catch (error) { console.error(`canvas bridge: a ${name} listener threw`, error); }
    }
  }

  _event(event) {
    const data = { ...event.data };
    switch (event.event) {
      case 'canvas.result': this._emit('canvasResult', data); break;
      case 'canvas.stateChanged':
        this._known.state = data.to;
        this._emit('stateChanged', data);
        break;
      case 'pencil.doubleTap': this._emit('pencilDoubleTap', data); break;
      case 'document.saved':
        // Every save, this page's and others', comes on the shared documents topic.
        if (event.session === 'documents') this._emit('documentSaved', data);
        break;
      default: break;
    }
  }

  _connectionChanged(channel, up) {
    this._emit('connectionChanged', { channel, connected: up });
    if (channel !== 'requests' || !this.session) return;
    if (!up) {
      this._wasDown = true;
      return;
    }
    if (this._wasDown) {
      this._wasDown = false;
      this._checkSession().catch((error) => this._emit('sessionRestored', { error }));
    }
  }

  // After a reconnect: is the session still there? If the server lost it (a restart), say
  // what went with it and carry on in a new session.
  async _checkSession() {
    const before = { session: this.session, ...this._known };
    const lastSeq = this.events.lastSeq(this.session) ?? 0;
    try {
      const state = await this.requests.call('canvas.state', {}, { session: this.session });
      this._emit('sessionRestored', { sessionLost: false, session: this.session, eventsMissed: Math.max(0, state.seq - lastSeq) });
    } catch (error) {
      if (error.code !== 'UNKNOWN_SESSION') throw error;
      await this._openSession();
      this._emit('sessionRestored', {
        sessionLost: true,
        previousSession: before.session,
        session: this.session,
        lost: { state: before.state, strokes: before.strokes, texts: before.texts, target: before.target,
          eventsAfterSeq: lastSeq },
      });
    }
  }
}
