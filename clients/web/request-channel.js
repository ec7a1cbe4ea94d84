// Requests and replies over a ZWS connection to canvasd's ROUTER: ids, timeouts, reconnects,
// and a retry of every unanswered request with the same id once the connection is back (the
// server answers a retry of a session request from its reply cache, so nothing runs twice).

import { ZWSConnection, MAX_FRAME_BYTES, frameBytes } from './zws.js';
import { CanvasError } from './errors.js';

export class RequestChannel {
  /**
   * @param {string} url ws:// address of the request endpoint
   * @param {{token?: string, timeoutMs?: number, onConnection?: (up: boolean) => void}} options
   */
  constructor(url, options = {}) {
    this.url = url;
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10000;
    this.onConnection = options.onConnection ?? (() => {});
    this._pending = new Map();   // id -> {frames, resolve, reject, timer, method}
    this._next = 1;
    this._prefix = Math.random().toString(36).slice(2, 8);
    this._closed = false;
    this._delay = 100;
    this._ready = null;
    this._connect();
  }

  /** Resolves once connected (the first time, or again after a reconnect). */
  ready() { return this._ready.promise; }

  get connected() { return !!this.connection?.isOpen; }

  /**
   * Sends a request; resolves to its `result`, rejects with a CanvasError.
   * `attachments` are binary frames after the JSON frame (each under the frame limit).
   */
  call(method, params = {}, { session, attachments = [], timeoutMs } = {}) {
    const id = `${this._prefix}-${this._next++}`;
    const request = { id, method, params };
    if (session) request.session = session;
    if (this.token) request.token = this.token;
    const text = JSON.stringify(request);
    const frames = [frameBytes(text), ...attachments.map(frameBytes)];
    const tooBig = frames.find((frame) => frame.length + 1 > MAX_FRAME_BYTES);
    if (tooBig) {
      return Promise.reject(new CanvasError('TOO_LARGE_FOR_BROWSER',
        `the request frame is ${tooBig.length} bytes; a browser can send at most ${MAX_FRAME_BYTES - 1}`,
        { size: tooBig.length, limit: MAX_FRAME_BYTES - 1 }, method));
    }
    return new Promise((resolve, reject) => {
      const entry = { frames, resolve, reject, method, sent: false };
      entry.timer = setTimeout(() => {
        this._pending.delete(id);
        reject(new CanvasError('TIMEOUT', `no reply within ${timeoutMs ?? this.timeoutMs} ms`,
          { timeoutMs: timeoutMs ?? this.timeoutMs, connected: this.connected }, method));
      }, timeoutMs ?? this.timeoutMs);
      this._pending.set(id, entry);
      this._send(entry);
    });
  }

  /** Closes for good; requests still waiting fail with DISCONNECTED. */
  close() {
    this._closed = true;
    this.connection?.close();
    for (const [id, entry] of this._pending) {
      clearTimeout(entry.timer);
      entry.reject(new CanvasError('DISCONNECTED', 'the client was closed', {}, entry.method));
      this._pending.delete(id);
    }
  }

  _send(entry) {
    if (!this.connected) return;   // sent when the connection is (back) up
    try {
      this.connection.send(entry.frames);
      entry.sent = true;
    } catch (_) {
      // The connection went down between the check and the send: retried on reconnect.
    }
  }

  _connect() {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    if (!this._ready || this._ready.done) this._ready = { promise, resolve, done: false };
    const connection = new ZWSConnection(this.url);
    this.connection = connection;
    connection.onopen = () => {
      this._delay = 100;
      this._ready.done = true;
      this._ready.resolve();
      this.onConnection(true);
      // Everything still unanswered goes again, with the same id.
      for (const entry of this._pending.values()) this._send(entry);
    };
    connection.onmessage = (frames) => this._reply(frames);
    connection.onclose = () => {
      const wasUp = connection === this.connection && this._ready.done;
      if (this._closed) return;
      if (wasUp) this.onConnection(false);
      // Retry with a growing pause, at most two seconds apart.
      setTimeout(() => { if (!this._closed) this._connect(); }, this._delay);
      this._delay = Math.min(this._delay * 2, 2000);
    };
  }

  _reply(frames) {
    const last = frames[frames.length - 1];
    let reply;
    try {
      reply = JSON.parse(new TextDecoder().decode(last));
    } catch (_) {
      return;   // not a reply we can read; its request times out
    }
    const entry = this._pending.get(reply.id);
    if (!entry) return;   // a late reply to a request that timed out
    this._pending.delete(reply.id);
    clearTimeout(entry.timer);
    if (reply.error) {
      entry.reject(new CanvasError(reply.error.code, reply.error.message, reply.error.data ?? {}, entry.method));
    } else {
      entry.resolve(reply.result);
    }
  }
}
