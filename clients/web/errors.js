// Errors as a web page sees them: one class, the protocol's code and data kept.

/**
 * A request that failed. `code` is the protocol's error code (INVALID_STATE, NOT_FOUND, ...)
 * or one of the client's own: TIMEOUT (no reply in time), DISCONNECTED (closed while waiting,
 * or a write without a session cut off after it was sent: `data.outcome` is "unknown"),
 * SESSION_LOST (the session went away before the request was answered), TOO_LARGE_FOR_BROWSER
 * (a request that cannot be split under the browser's frame limit), INTEGRITY (bytes whose
 * sha256 is not the one the server named).
 */
export class CanvasError extends Error {
  /**
   * @param {import('./canvas-bridge').ErrorCode} code
   * @param {string} message
   * @param {Record<string, any>} [data]
   * @param {string} [method]
   */
  constructor(code, message, data = {}, method = undefined) {
    super(method ? `${method}: ${message}` : message);
    /** @type {'CanvasError'} */
    this.name = 'CanvasError';
    this.code = code;
    this.data = data;
    this.method = method;
  }
}
