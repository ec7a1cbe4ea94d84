// Events from canvasd's XPUB over ZWS: subscriptions (sent again after every reconnect),
// each topic's `seq` checked, and a gap reported when events were lost.

import { ZWSConnection } from './zws.js';

export class EventChannel {
  /**
   * @param {string} url ws:// address of the event endpoint
   * @param {{token?: string, onEvent: (event: object) => void, onGap: (gap: object) => void,
   *          onConnection?: (up: boolean) => void}} options
   */
  constructor(url, options) {
    this.url = url;
    this.token = options.token;
    this.onEvent = options.onEvent;
    this.onGap = options.onGap;
    this.onConnection = options.onConnection ?? (() => {});
    this._topics = new Set();
    this._lastSeq = new Map();   // stream ("<session>" or "documents") -> last seq seen
    this._closed = false;
    this._delay = 100;
    this._connect();
    this._opened = new Promise((resolve) => { this._resolveOpened = resolve; });
  }

  /** Resolves once the first connection is up. */
  ready() { return this._opened; }

  /** Receives events whose topic starts with `topic` (e.g. "<session>." or "documents."). */
  subscribe(topic) {
    this._topics.add(topic);
    this.connection?.subscribe(this._wire(topic));
  }

  unsubscribe(topic) {
    this._topics.delete(topic);
    this.connection?.subscribe(this._wire(topic), false);
  }

  /** What the next event of `stream` must carry; set when a stream starts (a new session: 0). */
  expect(stream, lastSeq) { this._lastSeq.set(stream, lastSeq); }

  /** The last seq seen on `stream`, or undefined. */
  lastSeq(stream) { return this._lastSeq.get(stream); }

  close() {
    this._closed = true;
    this.connection?.close();
  }

  // With tokens the server wants "TOKEN\nTOPIC", so it can tell whose subscription it is.
  _wire(topic) { return this.token ? `${this.token}\n${topic}` : topic; }

  _connect() {
    const connection = new ZWSConnection(this.url);
    this.connection = connection;
    connection.onopen = () => {
      this._delay = 100;
      this._resolveOpened();
      for (const topic of this._topics) connection.subscribe(this._wire(topic));
      this.onConnection(true);
    };
    connection.onmessage = (frames) => this._receive(frames);
    connection.onclose = () => {
      if (this._closed) return;
      this.onConnection(false);
      setTimeout(() => { if (!this._closed) this._connect(); }, this._delay);
      this._delay = Math.min(this._delay * 2, 2000);
    };
  }

  _receive(frames) {
    if (frames.length < 2) return;
    let event;
    try {
      event = JSON.parse(new TextDecoder().decode(frames[1]));
    } catch (_) {
      return;
    }
    const stream = event.session;
    const last = this._lastSeq.get(stream);
    if (last !== undefined && event.seq !== last + 1) {
      if (event.seq > last + 1) {
        this.onGap({ stream, expected: last + 1, received: event.seq, missed: event.seq - last - 1 });
      } else {
        // An older or repeated seq: a restarted server counts from 1 again.
        this.onGap({ stream, expected: last + 1, received: event.seq, missed: null, restarted: true });
      }
    }
    this._lastSeq.set(stream, event.seq);
    this.onEvent(event);
  }
}
