// One ZWS connection to canvasd that comes back by itself: the socket, driven by the
// connection machine (connection-machine.js). The request and event channels each hold one.

import { start, step } from './connection-machine.js';
import { SUBPROTOCOL, ROUTING_ID, HANG_UP, FrameAssembler, encodeMessage } from './zws.js';
import { CanvasError } from './errors.js';

/**
 * @typedef {object} ConnectionHandlers
 * @property {() => void} [onUp] the connection is ready (the first time, or again)
 * @property {() => void} [onDown] a ready connection was lost; it is being retried
 * @property {(frames: Uint8Array[]) => void} [onMessage] a whole message from the server
 */

export class Connection {
  /**
   * @param {string} url ws:// address
   * @param {ConnectionHandlers} handlers
   */
  constructor(url, handlers = {}) {
    this.url = url;
    this.onUp = handlers.onUp ?? (() => {});
    this.onDown = handlers.onDown ?? (() => {});
    this.onMessage = handlers.onMessage ?? (() => {});
    /** @type {WebSocket | null} */
    this.ws = null;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.retryTimer = undefined;
    this.assembler = new FrameAssembler();
    /** @type {{ resolve: () => void, reject: (error: Error) => void }[]} */
    this.waiting = [];
    const first = start();
    this.state = first.state;
    this.run(first.actions);
  }

  /** @returns {import('./connection-machine.js').Phase} */
  get phase() { return this.state.phase; }

  get isReady() { return this.state.phase === 'ready'; }

  /** Resolves when the connection is next ready (at once if it is); rejects once it is closed. */
  whenReady() {
    if (this.isReady) return Promise.resolve();
    if (this.phase === 'closed') return Promise.reject(this.closedError());
    return /** @type {Promise<void>} */ (new Promise((resolve, reject) => {
      this.waiting.push({ resolve: () => resolve(), reject });
    }));
  }

  /**
   * Sends one message of frames; throws when the connection is not ready.
   * @param {(string | Uint8Array | ArrayBuffer)[]} frames
   */
  send(frames) {
    const messages = encodeMessage(frames);
    if (!this.isReady || !this.ws) throw new CanvasError('DISCONNECTED', `not connected to ${this.url}`);
    for (const message of messages) this.ws.send(message);
  }

  /**
   * Sends one raw WebSocket message (a subscription) when ready; dropped otherwise.
   * @param {Uint8Array} message
   */
  sendRaw(message) {
    if (this.isReady && this.ws) this.ws.send(message);
  }

  /** Closes for good, at once: canvasd lets go of the connection too (HANG_UP). */
  close() { this.dispatch('close'); }

  closedError() { return new CanvasError('DISCONNECTED', `the connection to ${this.url} was closed`); }

  /** @param {import('./connection-machine.js').ConnectionEvent} event */
  dispatch(event) {
    const next = step(this.state, event);
    this.state = next.state;
    this.run(next.actions);
  }

  /** @param {import('./connection-machine.js').ConnectionAction[]} actions */
  run(actions) {
    for (const action of actions) {
      switch (action.kind) {
        case 'openSocket': this.openSocket(); break;
        case 'sendRoutingId': this.ws?.send(ROUTING_ID); break;
        case 'announceUp': {
          const waiting = this.waiting;
          this.waiting = [];
          for (const waiter of waiting) waiter.resolve();
          this.onUp();
          break;
        }
        case 'announceDown': this.onDown(); break;
        case 'scheduleRetry':
          this.retryTimer = setTimeout(() => this.dispatch('retryDue'), action.delayMs);
          break;
        case 'closeSocket': this.hangUp(); break;
        case 'announceClosed': {
          const waiting = this.waiting;
          this.waiting = [];
          for (const waiter of waiting) waiter.reject(this.closedError());
          break;
        }
        default: break;
      }
    }
  }

  openSocket() {
    this.assembler.reset();
    const ws = new WebSocket(this.url, [SUBPROTOCOL]);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => {
      if (ws !== this.ws) return;
      // A server that did not take ZWS2.0 is not canvasd's ws:// endpoint: closing retries.
      if (ws.protocol !== SUBPROTOCOL) ws.close();
      else this.dispatch('socketOpened');
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws || typeof event.data === 'string') return;   // ZWS has no text frames
      const bytes = new Uint8Array(event.data);
      if (this.phase === 'greeting') {
        this.dispatch('greeted');   // the server's routing id
        return;
      }
      if (this.phase !== 'ready') return;
      const frames = this.assembler.push(bytes);
      if (frames) this.onMessage(frames);
    };
    ws.onerror = () => {};   // always followed by close
    ws.onclose = () => { if (ws === this.ws) this.dispatch('socketClosed'); };
  }

  hangUp() {
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.ws = null;
    if (!ws) return;
    ws.onopen = ws.onmessage = ws.onclose = null;
    try {
      if (ws.readyState === WebSocket.OPEN) ws.send(HANG_UP);
      ws.close();
    } catch (_) {
      // Already closing: nothing more to let go of.
    }
  }
}
