// One ZWS connection to canvasd that comes back by itself: the socket, driven by the
// connection machine (connection-machine.js). The request and event channels each hold one.

import { start, step } from './connection-machine.js';
import { SUBPROTOCOL, ROUTING_ID, FrameAssembler, encodeMessage } from './zws.js';
import { openSocket } from './worker-socket.js';
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
    /** @type {import('./worker-socket.js').SocketLike | null} */
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
    this.ws.send(messages);
  }

  /**
   * Sends one raw WebSocket message (a subscription) when ready; dropped otherwise.
   * @param {Uint8Array} message
   */
  sendRaw(message) {
    if (this.isReady && this.ws) this.ws.send([message]);
  }

  /** Closes for good, at once: the socket's worker ends, and canvasd's end of it with it. */
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
        case 'sendRoutingId': this.ws?.send([ROUTING_ID]); break;
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
    const ws = openSocket(this.url, [SUBPROTOCOL]);
    this.ws = ws;
    ws.onopen = () => {
      if (ws !== this.ws) return;
      // A server that did not take ZWS2.0 is not canvasd's ws:// endpoint: dropping it retries.
      if (ws.protocol !== SUBPROTOCOL) this.lost(ws);
      else this.dispatch('socketOpened');
    };
    ws.onmessage = (data) => {
      if (ws !== this.ws || typeof data === 'string') return;   // ZWS has no text frames
      const bytes = new Uint8Array(data);
      if (this.phase === 'greeting') {
        this.dispatch('greeted');   // the server's routing id
        return;
      }
      if (this.phase !== 'ready') return;
      const frames = this.assembler.push(bytes);
      if (frames) this.onMessage(frames);
    };
    ws.onclose = () => { if (ws === this.ws) this.dispatch('socketClosed'); };
  }

  /**
   * Drops `ws` and carries on as if it had closed.
   * @param {import('./worker-socket.js').SocketLike} ws
   */
  lost(ws) {
    ws.drop();
    if (ws === this.ws) this.dispatch('socketClosed');
  }

  hangUp() {
    clearTimeout(this.retryTimer);
    this.ws?.drop();
    this.ws = null;
  }
}
