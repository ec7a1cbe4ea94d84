// A WebSocket that lives in a dedicated worker, so that it can be let go of at once.
//
// libzmq 4.3.4 never answers a WebSocket close frame, so after `ws.close()` Chromium keeps the
// TCP connection (and canvasd its end of it) for a minute, waiting for an answer; nothing a page
// can send makes libzmq drop it either (text, empty and fragmented frames only stop it reading).
// Terminating the worker that holds the socket drops the TCP connection at once (measured: 10 ms
// until canvasd had no established connection left, against 60 s after close()).

/** The worker: one socket, its events posted back; frames moved, not copied. */
const WORKER_SOURCE = `
let ws = null;
onmessage = (event) => {
  const command = event.data;
  if (command.open) {
    ws = new WebSocket(command.open, command.protocols);
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => postMessage({ type: 'open', protocol: ws.protocol });
    ws.onmessage = (message) => {
      if (typeof message.data === 'string') postMessage({ type: 'text' });
      else postMessage({ type: 'message', data: message.data }, [message.data]);
    };
    ws.onclose = () => postMessage({ type: 'close' });
  } else if (command.send && ws) {
    for (const bytes of command.send) ws.send(bytes);
  }
};
`;

/** @type {string | null} */
let workerUrl = null;

/**
 * What Connection needs of a WebSocket, whether it lives in a worker or not.
 * @typedef {object} SocketLike
 * @property {string} protocol
 * @property {boolean} isOpen
 * @property {(() => void) | null} onopen
 * @property {((data: ArrayBuffer | string) => void) | null} onmessage
 * @property {(() => void) | null} onclose
 * @property {(messages: Uint8Array[]) => void} send
 * @property {() => void} drop let go of the connection now; no event follows
 */

/**
 * Opens `url` in a worker when the page may start one (a blob: worker, so any origin serving
 * this module works), or as a plain WebSocket otherwise (a content security policy without
 * `worker-src blob:`); the latter can only close politely.
 * @param {string} url
 * @param {string[]} protocols
 * @returns {SocketLike}
 */
export function openSocket(url, protocols) {
  try {
    return new WorkerSocket(url, protocols);
  } catch (_) {
    return new PlainSocket(url, protocols);
  }
}

/** @implements {SocketLike} */
class WorkerSocket {
  /**
   * @param {string} url
   * @param {string[]} protocols
   */
  constructor(url, protocols) {
    // A bad address throws here, in the page, as new WebSocket would.
    void new URL(url);
    if (!/^wss?:$/.test(new URL(url).protocol)) throw new SyntaxError(`not a ws:// address: ${url}`);
    workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'text/javascript' }));
    this.protocol = '';
    this.isOpen = false;
    /** @type {(() => void) | null} */
    this.onopen = null;
    /** @type {((data: ArrayBuffer | string) => void) | null} */
    this.onmessage = null;
    /** @type {(() => void) | null} */
    this.onclose = null;
    this.worker = new Worker(workerUrl);
    this.worker.onmessage = (event) => this.received(event.data);
    this.worker.onerror = () => this.ended();
    this.worker.postMessage({ open: url, protocols });
  }

  /** @param {any} report */
  received(report) {
    if (report.type === 'open') {
      this.protocol = report.protocol;
      this.isOpen = true;
      this.onopen?.();
    } else if (report.type === 'message') {
      this.onmessage?.(report.data);
    } else if (report.type === 'text') {
      this.onmessage?.('');
    } else if (report.type === 'close') {
      this.ended();
    }
  }

  ended() {
    if (!this.worker) return;
    this.worker.terminate();
    // @ts-ignore: gone for good
    this.worker = null;
    this.isOpen = false;
    this.onclose?.();
  }

  /** @param {Uint8Array[]} messages */
  send(messages) {
    if (!this.isOpen) throw new Error('the socket is not open');
    this.worker.postMessage({ send: messages });
  }

  drop() {
    this.onopen = this.onmessage = this.onclose = null;
    this.isOpen = false;
    this.worker?.terminate();
    // @ts-ignore: gone for good
    this.worker = null;
  }
}

/** @implements {SocketLike} */
class PlainSocket {
  /**
   * @param {string} url
   * @param {string[]} protocols
   */
  constructor(url, protocols) {
    /** @type {(() => void) | null} */
    this.onopen = null;
    /** @type {((data: ArrayBuffer | string) => void) | null} */
    this.onmessage = null;
    /** @type {(() => void) | null} */
    this.onclose = null;
    this.ws = new WebSocket(url, protocols);
    this.ws.binaryType = 'arraybuffer';
    this.ws.onopen = () => this.onopen?.();
    this.ws.onmessage = (event) => this.onmessage?.(event.data);
    this.ws.onerror = () => {};   // always followed by close
    this.ws.onclose = () => this.onclose?.();
  }

  get protocol() { return this.ws.protocol; }

  get isOpen() { return this.ws.readyState === WebSocket.OPEN; }

  /** @param {Uint8Array[]} messages */
  send(messages) { for (const message of messages) this.ws.send(message); }

  drop() {
    this.onopen = this.onmessage = this.onclose = null;
    try { this.ws.close(); } catch (_) { /* already closing */ }
  }
}
