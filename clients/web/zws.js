// ZeroMQ over WebSocket (ZWS 2.0, ZeroMQ RFC 45) as a browser can speak it: the framing only.
// Connection (connection.js) owns the socket.
//
// One ZMTP frame is one binary WebSocket message: a flags byte (0x01 more frames follow,
// 0x02 command) and the body. There is no ZMTP greeting; each side's first message is its
// routing id. A browser may offer only the subprotocol "ZWS2.0" (no "/" is allowed in a
// subprotocol name), so no security mechanism runs: authentication is the application's.

const MORE = 0x01;
const COMMAND = 0x02;

/** The subprotocol libzmq matches exactly. */
export const SUBPROTOCOL = 'ZWS2.0';

/**
 * Chromium fragments large outgoing messages, and libzmq 4.3.4 silently drops a connection on
 * a fragmented frame. Measured once at about 128 KiB; with Chromium 156 headless here, frames of
 * 66,500 bytes went through and 67,000 did not. So no frame a browser sends may be this large.
 */
export const MAX_FRAME_BYTES = 60 * 1024;

/** Our routing id: empty, so the server's ROUTER makes one up. */
export const ROUTING_ID = new Uint8Array([0]);

const encoder = new TextEncoder();

/**
 * Bytes of a frame body given as a string (UTF-8) or bytes.
 * @param {string | Uint8Array | ArrayBuffer} body
 * @returns {Uint8Array}
 */
export function frameBytes(body) {
  if (typeof body === 'string') return encoder.encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError('a frame is a string, a Uint8Array or an ArrayBuffer');
}

/**
 * The WebSocket messages of one ZeroMQ message; each frame must stay under MAX_FRAME_BYTES.
 * @param {(string | Uint8Array | ArrayBuffer)[]} frames
 * @returns {Uint8Array[]}
 */
export function encodeMessage(frames) {
  const bodies = frames.map(frameBytes);
  for (const body of bodies) {
    if (body.length + 1 > MAX_FRAME_BYTES) {
      throw new RangeError(`a frame of ${body.length} bytes is over the browser limit of ${MAX_FRAME_BYTES}`);
    }
  }
  return bodies.map((body, index) => {
    const message = new Uint8Array(body.length + 1);
    message[0] = index < bodies.length - 1 ? MORE : 0;
    message.set(body, 1);
    return message;
  });
}

/**
 * A subscription (0x01 + topic) or its end (0x00 + topic) for an XPUB peer, in one frame.
 * @param {string} topic
 * @param {boolean} on
 * @returns {Uint8Array}
 */
export function encodeSubscription(topic, on) {
  const body = frameBytes(topic);
  const message = new Uint8Array(body.length + 2);
  message[0] = 0;
  message[1] = on ? 1 : 0;
  message.set(body, 2);
  return message;
}

/** Joins incoming WebSocket messages into whole ZeroMQ messages. */
export class FrameAssembler {
  constructor() {
    /** @type {Uint8Array[]} */
    this.parts = [];
  }

  /**
   * @param {Uint8Array} bytes one WebSocket message after the routing id
   * @returns {Uint8Array[] | null} the whole message when this was its last frame
   */
  push(bytes) {
    if (bytes.length === 0) return null;
    const flags = bytes[0];
    if (flags & COMMAND) return null;   // ZMTP commands (PING, ...) need no answer from us
    this.parts.push(bytes.subarray(1));
    if (flags & MORE) return null;
    const frames = this.parts;
    this.parts = [];
    return frames;
  }

  reset() { this.parts = []; }
}
