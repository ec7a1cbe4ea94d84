// Events from canvasd's XPUB over ZWS: subscriptions (sent again after every reconnect),
// each topic's `seq` checked, and a gap reported when events were lost.

import { Connection } from './connection.js';
import { encodeSubscription } from './zws.js';

export class EventChannel {
  /**
   * @param {string} url ws:// address of the event endpoint
   * @param {{token?: string, onEvent: (event: any) => void, onGap: (gap: any) => void,
   *          onConnection?: (up: boolean) => void}} options
   */
  constructor(url, options) {
    this.url = url;
    this.token = options.token;
    this.onEvent = options.onEvent;
    this.onGap = options.onGap;
    this.onConnection = options.onConnection ?? (() => {});
    /** @type {Set<string>} */
    this.topics = new Set();
    /** @type {Map<string, number>} stream ("<session>" or "documents") -> last seq seen */
    this.seen = new Map();
    this.connection = new Connection(url, {
      onUp: () => {
        for (const topic of this.topics) this.connection.sendRaw(encodeSubscription(this.wire(topic), true));
        this.onConnection(true);
      },
      onDown: () => this.onConnection(false),
      onMessage: (frames) => this.receive(frames),
    });
  }

  /** Resolves once connected (at once when it is); rejects once closed. */
  ready() { return this.connection.whenReady(); }

  /**
   * Receives events whose topic starts with `topic` (e.g. "<session>." or "documents.").
   * @param {string} topic
   */
  subscribe(topic) {
    this.topics.add(topic);
    this.connection.sendRaw(encodeSubscription(this.wire(topic), true));
  }

  /** @param {string} topic */
  unsubscribe(topic) {
    this.topics.delete(topic);
    this.connection.sendRaw(encodeSubscription(this.wire(topic), false));
  }

  /**
   * What the next event of `stream` must follow; set when a stream starts (a new session: 0).
   * @param {string} stream
   * @param {number} lastSeq
   */
  expect(stream, lastSeq) { this.seen.set(stream, lastSeq); }

  /**
   * The last seq seen on `stream`, or undefined.
   * @param {string} stream
   */
  lastSeq(stream) { return this.seen.get(stream); }

  close() { this.connection.close(); }

  // With tokens the server wants "TOKEN\nTOPIC", so it can tell whose subscription it is.
  /** @param {string} topic */
  wire(topic) { return this.token ? `${this.token}\n${topic}` : topic; }

  /** @param {Uint8Array[]} frames */
  receive(frames) {
    if (frames.length < 2) return;
    let event;
    try {
      event = JSON.parse(new TextDecoder().decode(frames[1]));
    } catch (_) {
      return;
    }
    const stream = event.session;
    const last = this.seen.get(stream);
    if (last !== undefined && event.seq !== last + 1) {
      if (event.seq > last + 1) {
        this.onGap({ stream, expected: last + 1, received: event.seq, missed: event.seq - last - 1 });
      } else {
        // An older or repeated seq: a restarted server counts from 1 again.
        this.onGap({ stream, expected: last + 1, received: event.seq, missed: null, restarted: true });
      }
    }
    this.seen.set(stream, event.seq);
    this.onEvent(event);
  }
}
