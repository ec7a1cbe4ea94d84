// Requests and replies over a ZWS connection to canvasd's ROUTER: ids, timeouts, and what an
// unanswered request becomes after a reconnect (retry-policy.js).

import { Connection } from './connection.js';
import { MAX_FRAME_BYTES, frameBytes } from './zws.js';
import { CanvasError } from './errors.js';
import { afterReconnect } from './retry-policy.js';

/**
 * @typedef {object} Pending
 * @property {Uint8Array[]} frames
 * @property {string} method
 * @property {boolean} hasSession
 * @property {boolean} sent
 * @property {(value: any) => void} resolve
 * @property {(error: CanvasError) => void} reject
 * @property {ReturnType<typeof setTimeout>} [timer]
 */

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
    /** @type {Map<string, Pending>} */
    this.pending = new Map();
    this.next = 1;
    this.prefix = Math.random().toString(36).slice(2, 8);
    this.connection = new Connection(url, {
      onUp: () => this.reconnected(),
      onDown: () => this.onConnection(false),
      onMessage: (frames) => this.reply(frames),
    });
  }

  /** Resolves once connected (at once when it is); rejects once closed. */
  ready() { return this.connection.whenReady(); }

  get connected() { return this.connection.isReady; }

  /**
   * Sends a request; resolves to its `result`, rejects with a CanvasError.
   * `attachments` are binary frames after the JSON frame (each under the frame limit).
   * @param {string} method
   * @param {Record<string, unknown>} [params]
   * @param {{session?: string, attachments?: Uint8Array[], timeoutMs?: number}} options
   * @returns {Promise<any>}
   */
  call(method, params = {}, { session, attachments = [], timeoutMs } = {}) {
    if (this.connection.phase === 'closed') {
      return Promise.reject(new CanvasError('DISCONNECTED', 'the client was closed', {}, method));
    }
    const id = `${this.prefix}-${this.next++}`;
    /** @type {Record<string, unknown>} */
    const request = { id, method, params };
    if (session) request.session = session;
    if (this.token) request.token = this.token;
    const frames = [frameBytes(JSON.stringify(request)), ...attachments.map(frameBytes)];
    const tooBig = frames.find((frame) => frame.length + 1 > MAX_FRAME_BYTES);
    if (tooBig) {
      return Promise.reject(new CanvasError('TOO_LARGE_FOR_BROWSER',
        `the request frame is ${tooBig.length} bytes; a browser can send at most ${MAX_FRAME_BYTES - 1}`,
        { size: tooBig.length, limit: MAX_FRAME_BYTES - 1 }, method));
    }
    const waited = timeoutMs ?? this.timeoutMs;
    return new Promise((resolve, reject) => {
      /** @type {Pending} */
      const entry = { frames, method, hasSession: !!session, sent: false, resolve, reject };
      entry.timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CanvasError('TIMEOUT', `no reply within ${waited} ms`,
          { timeoutMs: waited, connected: this.connected, sent: entry.sent }, method));
      }, waited);
      this.pending.set(id, entry);
      this.send(entry);
    });
  }

  /** Closes for good, at once; requests still waiting fail with DISCONNECTED. */
  close() {
    this.connection.close();
    for (const [id, entry] of this.pending) this.settle(id, entry,
      new CanvasError('DISCONNECTED', 'the client was closed', { sent: entry.sent }, entry.method));
  }

  /** @param {Pending} entry */
  send(entry) {
    if (!this.connected) return;   // sent when the connection is (back) up
    try {
      this.connection.send(entry.frames);
      entry.sent = true;
    } catch (_) {
      // The connection went down between the check and the send: it never left, so it goes
      // when the connection is back.
    }
  }

  reconnected() {
    for (const [id, entry] of this.pending) {
      if (afterReconnect(entry.method, entry.hasSession, entry.sent) === 'resend') {
        this.send(entry);
      } else {
        this.settle(id, entry, new CanvasError('DISCONNECTED',
          'the connection dropped after the request was sent, and it names no session, so it is not sent again: it may or may not have been carried out',
          { sent: true, outcome: 'unknown' }, entry.method));
      }
    }
    this.onConnection(true);
  }

  /**
   * @param {string} id
   * @param {Pending} entry
   * @param {CanvasError} error
   */
  settle(id, entry, error) {
    this.pending.delete(id);
    clearTimeout(entry.timer);
    entry.reject(error);
  }

  /** @param {Uint8Array[]} frames */
  reply(frames) {
    const last = frames[frames.length - 1];
    let reply;
    try {
      reply = JSON.parse(new TextDecoder().decode(last));
    } catch (_) {
      return;   // not a reply we can read; its request times out
    }
    const entry = this.pending.get(reply.id);
    if (!entry) return;   // a late reply to a request that timed out
    this.pending.delete(reply.id);
    clearTimeout(entry.timer);
    if (reply.error) {
      entry.reject(new CanvasError(reply.error.code, reply.error.message, reply.error.data ?? {}, entry.method));
    } else {
      entry.resolve(reply.result);
    }
  }
}
