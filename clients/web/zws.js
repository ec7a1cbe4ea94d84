// ZeroMQ over WebSocket (ZWS 2.0, ZeroMQ RFC 45) as a browser can speak it.
//
// One ZMTP frame is one binary WebSocket message: a flags byte (0x01 more frames follow,
// 0x02 command) and the body. There is no ZMTP greeting; each side's first message is its
// routing id. A browser may offer only the subprotocol "ZWS2.0" (no "/" is allowed in a
// subprotocol name), so no security mechanism runs: authentication is the application's.

const MORE = 0x01;
const COMMAND = 0x02;

/**
 * Chromium fragments large outgoing messages, and libzmq 4.3.4 silently drops a connection on
 * a fragmented frame. Measured once at about 128 KiB; with Chromium 156 headless here, frames of
 * 66,500 bytes went through and 67,000 did not. So no frame a browser sends may be this large.
 */
export const MAX_FRAME_BYTES = 60 * 1024;

const encoder = new TextEncoder();

/** Bytes of a frame body given as a string (UTF-8) or bytes. */
export function frameBytes(body) {
  if (typeof body === 'string') return encoder.encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('a frame is a string, a Uint8Array or an ArrayBuffer');
}

/**
 * One ZWS 2.0 connection. `onmessage(frames)` gets each whole message as an array of
 * Uint8Array frames; `onopen()` once the routing ids are exchanged; `onclose(event)` when the
 * connection ends, for whatever reason. It does not reconnect: the channels above decide.
 */
export class ZWSConnection {
  /** @param {string} url ws:// address */
  constructor(url) {
    this.url = url;
    this.onopen = () => {};
    this.onmessage = () => {};
    this.onclose = () => {};
    this._parts = [];
    this._greeted = false;
    this._closed = false;
    this.ws = new WebSocket(url, ['ZWS2.0']);
    this.ws.binaryType = 'arraybuffer';
    this.ws.onopen = () => {
      if (this.ws.protocol !== 'ZWS2.0') {
        this.close();
        return;
      }
      // Our routing id: empty, so the server's ROUTER makes one up.
      this.ws.send(new Uint8Array([0]));
    };
    this.ws.onmessage = (event) => this._receive(event.data);
    this.ws.onclose = (event) => this._ended(event);
    this.ws.onerror = () => {};   // always followed by close
  }

  get isOpen() { return this._greeted && !this._closed; }

  /** Sends one message of frames (strings or bytes). Each frame must stay under MAX_FRAME_BYTES. */
  send(frames) {
    if (!this.isOpen) throw new Error(`not connected to ${this.url}`);
    const bodies = frames.map(frameBytes);
    for (const body of bodies) {
      if (body.length + 1 > MAX_FRAME_BYTES) {
        throw new RangeError(`a frame of ${body.length} bytes is over the browser limit of ${MAX_FRAME_BYTES}`);
      }
    }
    bodies.forEach((body, index) => {
      const message = new Uint8Array(body.length + 1);
      message[0] = index < bodies.length - 1 ? MORE : 0;
      message.set(body, 1);
      this.ws.send(message);
    });
  }

  /** Sends a subscription (0x01 + topic) or its end (0x00 + topic), for an XPUB peer. */
  subscribe(topic, on = true) {
    if (!this.isOpen) return;
    // A frame (flags 0) whose body is the subscription byte and the topic.
    const body = frameBytes(topic);
    const message = new Uint8Array(body.length + 2);
    message[0] = 0;
    message[1] = on ? 1 : 0;
    message.set(body, 2);
    this.ws.send(message);
  }

  close() {
    if (this._closed) return;
    try { this.ws.close(); } catch (_) { /* already closing */ }
  }

  _receive(data) {
    if (typeof data === 'string') return;   // ZWS has no text frames
    const bytes = new Uint8Array(data);
    if (bytes.length === 0) return;
    if (!this._greeted) {
      // The server's routing id: the connection is ready.
      this._greeted = true;
      this.onopen();
      return;
    }
    const flags = bytes[0];
    if (flags & COMMAND) return;   // ZMTP commands (PING, ...) need no answer from us
    this._parts.push(bytes.subarray(1));
    if (!(flags & MORE)) {
      const frames = this._parts;
      this._parts = [];
      this.onmessage(frames);
    }
  }

  _ended(event) {
    if (this._closed) return;
    this._closed = true;
    this._parts = [];
    this.onclose(event);
  }
}
