// canvas bridge for web pages: the canvas plugin's API (open, minimize, submit, cancel, the
// pencil double-tap, listeners) over canvasd's ws:// endpoints. Plain ES modules, no build.
//
//   import { connect } from './canvas-bridge.js';
//   const Canvas = await connect({ url: 'ws://127.0.0.1:5580', events: 'ws://127.0.0.1:5581' });
//   await Canvas.addListener('canvasResult', (result) => console.log(result));
//   await Canvas.open({ document: 'notes.pdf', page: 0 });
//   await Canvas.addStroke({ points: [{ x: 72, y: 200, pressure: 0.5 }, { x: 300, y: 220 }] });
//   const result = await Canvas.submit({ imageData: true });

import { RequestChannel } from './request-channel.js';
import { EventChannel } from './event-channel.js';
import { Documents } from './documents.js';
import { CanvasError } from './errors.js';
import { splitStroke, frameParts, onInkGrid } from './strokes.js';
import { ReplayLog } from './replay-log.js';
import { SessionKeeper, lostError } from './session-keeper.js';

export { CanvasError } from './errors.js';
export { MAX_FRAME_BYTES } from './zws.js';
export { splitStroke, onInkGrid } from './strokes.js';
/** @typedef {import('./canvas-bridge').CanvasPlugin} PluginApi */

const LISTENER_EVENTS = new Set(['canvasResult', 'stateChanged', 'pencilDoubleTap', 'documentSaved',
  'connectionChanged', 'eventsLost', 'sessionRestored']);

/** Requests that may run again in a replacing session: the lost one's effects went with it. */
const REPLAYABLE = new Set(['drawing.addStroke', 'drawing.addText', 'drawing.editText', 'drawing.moveText',
  'drawing.erase', 'drawing.undo', 'drawing.redo', 'drawing.clear', 'drawing.get', 'canvas.state']);

/** The server's limit when its `hello` names none (canvasd's default). */
const DEFAULT_MAX_POINTS_PER_STROKE = 10000;

/**
 * Connects to canvasd and opens a session. `url` and `events` are the ws:// endpoints that
 * canvasd's --web-endpoint and --web-events bind; `token` is needed when it has --web-tokens.
 * `session` holds session.open's params (transitions, pencil, resultImages, size). With
 * `restore: 'replay'`, a session lost to a restart is replaced and what was drawn is sent again.
 * Whatever fails, connect() closes what it opened before it rejects.
 * (Typed by the .d.ts, so `tsc` checks this implementation against it.)
 * @type {typeof import('./canvas-bridge').connect}
 */
export const connect = async ({ url, events, token, timeoutMs, session = {}, restore = 'report' }) => {
  const plugin = new CanvasPlugin({ url, events, token, timeoutMs, sessionParams: session, restore });
  try {
    await plugin.start();
  } catch (error) {
    plugin.hangUp();
    throw error;
  }
  return plugin;
};

/** @implements {PluginApi} */
export class CanvasPlugin {
  /** @param {any} options */
  constructor({ url, events, token, timeoutMs, sessionParams, restore }) {
    /** @type {Map<string, Set<(data: any) => void>>} */
    this.listeners = new Map();
    this.sessionParams = { transitions: 'instant', ...sessionParams };
    this.restore = restore;
    this.known = { state: 'closed', strokes: 0, texts: 0, target: /** @type {any} */ (null) };
    this.log = new ReplayLog();
    /** The session calls go to ('' until connect() opened one). */
    this.session = '';
    /** @type {any} */
    this.hello = undefined;
    /** Whether calls can go, and what became of the session after a dropped connection. */
    this.keeper = new SessionKeeper(this);
    /** @type {Promise<unknown>} calls one after another, so a stroke's parts never interleave */
    this.tail = Promise.resolve();
    this.requests = new RequestChannel(url, {
      token, timeoutMs,
      onConnection: (up) => this.connectionChanged('requests', up),
    });
    this.events = new EventChannel(events, {
      token,
      onEvent: (event) => this.event(event),
      onGap: (gap) => this.emit('eventsLost', gap),
      onConnection: (up) => this.connectionChanged('events', up),
    });
    /** Document methods: list, info, revisions, get, upload, flatten, restore. */
    this.documents = new Documents(this.requests, (method, params, options) => this.call(method, params, options));
  }

  /** The server's `hello`: protocol, limits, methods. */
  get server() { return this.hello; }

  async start() {
    // A server that is not there (yet) is retried in the background; connect() gives up after
    // the request timeout, so a page can say so instead of waiting for ever.
    const waited = this.requests.timeoutMs;
    let timer;
    const gaveUp = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new CanvasError('TIMEOUT', `no connection to canvasd within ${waited} ms`,
        { timeoutMs: waited, requests: this.requests.connected, events: this.events.connection.isReady }, 'connect')), waited);
    });
    try {
      await Promise.race([Promise.all([this.requests.ready(), this.events.ready()]), gaveUp]);
    } finally {
      clearTimeout(timer);
    }
    this.hello = await this.requests.call('hello');
    this.events.subscribe('documents.');
    await this.openSession();
    this.keeper.dispatch({ kind: 'opened', session: this.session });
  }

  async openSession() {
    const opened = await this.requests.call('session.open', this.sessionParams);
    if (this.session) this.events.unsubscribe(`${this.session}.`);
    this.session = opened.session;
    this.known = { state: opened.state, strokes: 0, texts: 0, target: null };
    this.events.expect(opened.session, 0);
    this.events.subscribe(`${opened.session}.`);
    // One round trip, so the subscription (sent on the other connection) is in place before
    // anything this session does makes an event.
    await this.requests.call('canvas.state', {}, { session: opened.session });
    return opened;
  }

  /**
   * Sends any session method: resolves to its result, rejects with a CanvasError. Calls go
   * one after another; while the connection is down they wait for the session to be found
   * again (or replaced, or reported lost: SESSION_LOST).
   * @param {string} method
   * @param {Record<string, unknown>} [params]
   * @param {{timeoutMs?: number, attachments?: Uint8Array[]}} [options]
   */
  call(method, params = {}, options = {}) {
    return this.serially(() => this.callNow(method, params, options));
  }

  /**
   * @template T
   * @param {() => Promise<T>} task
   * @returns {Promise<T>}
   */
  serially(task) {
    const run = this.tail.then(task);
    this.tail = run.catch(() => {});
    return run;
  }

  /**
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {{timeoutMs?: number, attachments?: Uint8Array[]}} options
   * @param {{logged?: Record<string, unknown>, again?: boolean}} how `logged`: the params the
   *   replay log keeps (a stroke's last part stands for the whole stroke); `again: false`: not
   *   sent again in a replacing session (a part of a stroke whose first parts went with the old one)
   * @returns {Promise<any>}
   */
  async callNow(method, params, options, { logged = params, again = true } = {}) {
    const session = await this.keeper.usableSession(method, options.timeoutMs ?? this.requests.timeoutMs);
    try {
      const result = await this.requests.call(method, params, { ...options, session });
      this.track(method, logged, result);
      return result;
    } catch (error) {
      if (!(error instanceof CanvasError) || error.code !== 'UNKNOWN_SESSION' || this.keeper.phase === 'closed') throw error;
      // The session is gone (a restart, an expiry): find out what became of it.
      const outcome = await this.keeper.afterUnknown(session);
      if (again && outcome.session && outcome.session !== session && outcome.replayed && REPLAYABLE.has(method)) {
        return this.callNow(method, params, options, { logged });
      }
      throw lostError(method, session, outcome);
    }
  }

  /**
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {any} result
   */
  track(method, params, result) {
    this.log.answered(method, params, result);
    if (result && typeof result.state === 'string') this.known.state = result.state;
    if (result && typeof result.strokes === 'number') this.known.strokes = result.strokes;
    if (result && typeof result.texts === 'number') this.known.texts = result.texts;
    if (method === 'canvas.open' && params.document !== undefined && this.known.target === null) {
      this.known.target = { document: params.document, page: params.page ?? 0 };
    }
    // A reopen's drawing is the page's ink, not the empty one an open starts: its counts are
    // what a session lost afterwards is reported to have had.
    if (method === 'canvas.open' && result && result.reopened) {
      this.known = { ...this.known, strokes: result.reopened.strokes, texts: result.reopened.texts };
    }
    if ((method === 'canvas.submit' || method === 'canvas.cancel') && result) {
      this.known = { ...this.known, strokes: 0, texts: 0, target: null };
    }
  }

  // MARK: the plugin

  initialize() { return this.call('canvas.initialize'); }

  /**
   * Opens the canvas, on `page` of `document` when given (the page the ink goes to). With
   * `reopen: true` (canvas/1.8, needs `document`) a closed canvas opens with the page's canvas
   * ink as its drawing, and the result has `reopened` {edits, strokes, texts}; its submit then
   * replaces that ink on the page (CONFLICT `inkChanged` when another save changed it first).
   * `reopen` is sent only when true, so a plain open is the request it always was. With
   * `reopen: 'all'` the page's /Ink annotations made by other programs load too (`reopened`
   * then has `otherInk`, how many), and the submit replaces them. `inkForm`
   * (canvas/1.8, needs `document`): 'paper' (the default) or 'annotations', standard /Ink and
   * /FreeText annotations other PDF tools can edit (spec 5.3).
   * @param {{document?: string, page?: number, size?: {width: number, height: number}, reopen?: boolean | 'all', inkForm?: 'paper' | 'annotations'}} options
   */
  open({ document, page, size, reopen = false, inkForm } = {}) {
    /** @type {Record<string, unknown>} */
    const params = {};
    if (document !== undefined) params.document = document;
    if (page !== undefined) params.page = page;
    if (size !== undefined) params.size = size;
    if (reopen) params.reopen = reopen === 'all' ? 'all' : true;
    if (inkForm !== undefined) params.inkForm = inkForm;
    return this.call('canvas.open', params);
  }

  /** Resolves to a CanvasResult: {action: 'minimized', hasContent, imageData?}. */
  minimize({ imageData = false } = {}) { return this.call('canvas.minimize', { imageData }); }

  /** Resolves to a CanvasResult; with a document target also `document` {name, revision, pageCount, sha256}. */
  submit({ imageData = false } = {}) { return this.call('canvas.submit', { imageData }, { timeoutMs: 130000 }); }

  cancel({ imageData = false } = {}) { return this.call('canvas.cancel', { imageData }); }

  /** What an Apple Pencil double-tap does: opens a closed or minimized canvas, minimizes an open one. */
  doubleTap() { return this.call('pencil.doubleTap'); }

  /** @param {Record<string, unknown>} pencil */
  configurePencil(pencil) { return this.call('pencil.configure', pencil); }

  finishTransition() { return this.call('canvas.finishTransition'); }

  state() { return this.call('canvas.state'); }

  /**
   * Calls `fn` for each event of `name`: canvasResult, stateChanged, pencilDoubleTap,
   * documentSaved, and the connection's own connectionChanged, eventsLost, sessionRestored.
   * As Capacitor 3+ does, returns a promise of a handle (with `remove()`); the listener is
   * in place at once, and the promise carries `remove` too (Capacitor 3 and 4 pages use it so).
   * @param {string} name
   * @param {(data: any) => void} fn
   */
  addListener(name, fn) {
    if (!LISTENER_EVENTS.has(name)) throw new TypeError(`no event "${name}"; events: ${[...LISTENER_EVENTS].join(', ')}`);
    let listeners = this.listeners.get(name);
    if (!listeners) {
      listeners = new Set();
      this.listeners.set(name, listeners);
    }
    listeners.add(fn);
    const handle = { remove: async () => { this.listeners.get(name)?.delete(fn); } };
    return Object.assign(Promise.resolve(handle), handle);
  }

  async removeAllListeners() { this.listeners.clear(); }

  // MARK: drawing

  /**
   * Adds a pen or highlighter stroke. A stroke of more points than the server's
   * `maxPointsPerStroke` becomes several strokes, each within it (each after the first
   * starting where the one before ended, and `joined` to it: one undo step for the gesture);
   * each goes in `continued` parts that fit a browser frame. A refused part never stays
   * waiting to be joined to the next stroke. Points go on the ink's grid first (`onInkGrid`):
   * 0.01 pt and 0.001 of pressure, what the page keeps and a reopen gives back.
   * @param {{tool?: string, color?: string, width?: number, points: any[]}} stroke
   */
  addStroke({ tool = 'pen', color = 'black', width = 3, points }) {
    if (!Array.isArray(points) || points.length === 0) {
      return Promise.reject(new CanvasError('INVALID_PARAMS', 'points: at least one point', { field: 'points' }, 'drawing.addStroke'));
    }
    const limit = this.hello?.limits?.maxPointsPerStroke ?? DEFAULT_MAX_POINTS_PER_STROKE;
    const pieces = splitStroke(onInkGrid(points), limit);
    return this.serially(async () => {
      let result;
      let before = 0;
      for (let index = 0; index < pieces.length; index++) {
        try {
          // The pieces after the first join its undo step, so the gesture is undone whole.
          const style = index === 0 ? { tool, color, width } : { tool, color, width, joined: true };
          result = await this.sendStroke(style, pieces[index]);
          if (index === 0) before = result.strokes - 1;
        } catch (error) {
          // All or nothing: the pieces already added are one undo step, taken back, so a
          // refused stroke leaves the drawing as it was. A server that does not know `joined`
          // ignores it and makes a step of each piece: undo goes on until the strokes are as
          // many as before.
          let undone = 0;
          let strokes = index > 0 ? result.strokes : before;
          while (undone < index && strokes > before) {
            try { strokes = (await this.callNow('drawing.undo', {}, {})).strokes; } catch (_) { break; }
            undone += 1;
          }
          if (error instanceof CanvasError) error.data = { ...error.data, piece: index, pieces: pieces.length, undone };
          throw error;
        }
      }
      return { ...result, pieces: pieces.length };
    });
  }

  /**
   * One stroke within the server's limit, in frame-sized parts.
   * @param {{tool: string, color: string, width: number, joined?: boolean}} style
   * @param {any[]} points
   */
  async sendStroke(style, points) {
    const parts = frameParts(points);
    const whole = { ...style, points };
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.sendParts(style, parts, whole);
      } catch (error) {
        // Its first parts went with a lost session, and a new one has the drawing again:
        // the whole stroke goes again there.
        const replaced = error instanceof CanvasError && error.code === 'SESSION_LOST' && error.data.replayed;
        if (!replaced || attempt > 1) throw error;
      }
    }
  }

  /**
   * @param {{tool: string, color: string, width: number, joined?: boolean}} style
   * @param {any[][]} parts
   * @param {Record<string, unknown>} whole
   */
  async sendParts(style, parts, whole) {
    let result;
    for (let index = 0; index < parts.length; index++) {
      /** @type {Record<string, unknown>} */
      const params = { ...style, points: parts[index] };
      if (index < parts.length - 1) params.continued = true;
      try {
        result = await this.callNow('drawing.addStroke', params, {},
          { logged: index < parts.length - 1 ? params : whole, again: parts.length === 1 });
      } catch (error) {
        // The parts before this one may still wait on the server (canvas/1.4 keeps them after
        // a refusal); a request that changes nothing drops them, so the next stroke starts anew.
        if (index > 0) await this.callNow('pencil.configure', {}, {}).catch(() => {});
        throw error;
      }
    }
    return result;
  }

  /** @param {{text: string, x: number, y: number, fontSize?: number, color?: string}} text */
  addText({ text, x, y, fontSize = 16, color = 'black' }) {
    return this.call('drawing.addText', { text, x, y, fontSize, color });
  }

  /**
   * Changes a placed text: any of x, y (move), dx, dy (nudge), fontSize (8 to 48), color, text.
   * @param {number} index
   * @param {Record<string, unknown>} changes
   */
  editText(index, changes) { return this.call('drawing.editText', { index, ...changes }); }

  /**
   * @param {number} index
   * @param {{x: number, y: number}} to
   */
  moveText(index, { x, y }) { return this.call('drawing.moveText', { index, x, y }); }

  /**
   * @param {number} index
   * @param {number} dx
   * @param {number} dy
   */
  nudgeText(index, dx, dy) { return this.editText(index, { dx, dy }); }

  /**
   * @param {number} index
   * @param {number} fontSize
   */
  resizeText(index, fontSize) { return this.editText(index, { fontSize }); }

  /**
   * @param {number} index
   * @param {string} color
   */
  recolorText(index, color) { return this.editText(index, { color }); }

  /**
   * @param {number} index
   * @param {string} text
   */
  retext(index, text) { return this.editText(index, { text }); }

  /**
   * Erases around (x, y): whole strokes (`mode: 'stroke'`) or the ink under the eraser ('partial').
   * @param {{x: number, y: number, radius?: number, mode?: string}} at
   */
  erase({ x, y, radius = 8, mode = 'stroke' }) { return this.call('drawing.erase', { x, y, radius, mode }); }

  undo() { return this.call('drawing.undo'); }

  redo() { return this.call('drawing.redo'); }

  clear() { return this.call('drawing.clear'); }

  /** {strokes, texts, canUndo, canRedo}: exactly what was drawn. */
  getDrawing() { return this.call('drawing.get'); }

  /**
   * Closes the session and both connections, at once: a session.close is waited for only
   * while connected (at most a second), and canvasd lets go of both connections right away.
   */
  async close() {
    if (this.keeper.phase === 'closed') return;
    const session = this.session;
    const connected = this.requests.connected && this.keeper.phase === 'ready';
    this.keeper.dispatch({ kind: 'close' });
    if (connected && session) {
      await this.requests.call('session.close', {}, { session, timeoutMs: 1000 }).catch(() => {});
    }
    this.hangUp();
  }

  /** Closes both connections without a word to the server (connect() failing, close()). */
  hangUp() {
    this.keeper.dispatch({ kind: 'close' });
    this.requests.close();
    this.events.close();
  }

  // MARK: events and reconnects

  /**
   * @param {string} name
   * @param {any} data
   */
  emit(name, data) {
    for (const fn of this.listeners.get(name) ?? []) {
      try { fn(data); } catch (error) { console.error(`canvas bridge: a ${name} listener threw`, error); }
    }
  }

  /** @param {any} event */
  event(event) {
    // Events of a session this page no longer uses (replaced after a restart) are not its own.
    if (event.session !== 'documents' && event.session !== this.session) return;
    const data = { ...event.data };
    switch (event.event) {
      case 'canvas.result': this.emit('canvasResult', data); break;
      case 'canvas.stateChanged':
        this.known.state = data.to;
        this.emit('stateChanged', data);
        break;
      case 'pencil.doubleTap': this.emit('pencilDoubleTap', data); break;
      case 'document.saved':
        // Every save, this page's and others', comes on the shared documents topic.
        if (event.session === 'documents') this.emit('documentSaved', data);
        break;
      default: break;
    }
  }

  /**
   * @param {'requests' | 'events'} channel
   * @param {boolean} up
   */
  connectionChanged(channel, up) {
    this.emit('connectionChanged', { channel, connected: up });
    if (channel === 'requests') this.keeper.dispatch({ kind: up ? 'connectionUp' : 'connectionDown' });
  }
}
