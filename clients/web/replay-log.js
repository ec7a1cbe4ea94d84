// What the server acknowledged on the canvas since it was opened, kept so that a page whose
// session was lost to a restart can have it again (`restore: 'replay'`): the open (its target
// and size), every edit that was answered, and whether the canvas was then minimized. A submit
// or a cancel ends the drawing, and the log with it. An open with `reopen` is logged with it, so
// the replay reopens the page's ink (as saved in the document, which a restart keeps) and the
// edits made to it follow.

/** Edits replayed in the order they were answered. */
const EDITS = new Set(['drawing.addStroke', 'drawing.addText', 'drawing.editText', 'drawing.moveText',
  'drawing.erase', 'drawing.undo', 'drawing.redo', 'drawing.clear']);

/** @typedef {{ method: string, params: Record<string, unknown> }} LoggedRequest */

export class ReplayLog {
  constructor() {
    /** @type {Record<string, unknown> | null} the open that opened the canvas, or null when closed */
    this.open = null;
    /** @type {LoggedRequest[]} */
    this.edits = [];
    this.minimized = false;
  }

  /**
   * Records an answered request.
   * @param {string} method
   * @param {Record<string, unknown>} params
   * @param {any} result
   */
  answered(method, params, result) {
    if (method === 'canvas.open' && this.open === null) {
      this.open = { ...params };
      this.edits = [];
      this.minimized = false;
    } else if (method === 'canvas.open') {
      this.minimized = false;
    } else if (method === 'canvas.minimize') {
      this.minimized = true;
    } else if (method === 'canvas.submit' || method === 'canvas.cancel') {
      this.open = null;
      this.edits = [];
      this.minimized = false;
    } else if (method === 'pencil.doubleTap' && result) {
      if (result.outcome === 'opened' && this.open === null) {
        this.open = {};
        this.edits = [];
      }
      if (result.outcome === 'opened') this.minimized = false;
      if (result.outcome === 'minimized') this.minimized = true;
    } else if (EDITS.has(method) && this.open !== null && !params.continued) {
      this.edits.push({ method, params });
    }
  }

  /** The requests that make a new session's canvas what this one's was; none when it was closed. */
  requests() {
    if (this.open === null) return [];
    /** @type {LoggedRequest[]} */
    const requests = [{ method: 'canvas.open', params: this.open }, ...this.edits];
    if (this.minimized) requests.push({ method: 'canvas.minimize', params: {} });
    return requests;
  }
}
