// Documents over the wire: the bytes of a revision fetched in pieces and hash-checked, and a
// resumable upload sent in parts under the browser's frame limit.

import { CanvasError } from './errors.js';
import { sha256Hex } from './sha256.js';

/** Bytes of one binary frame of an upload part: under the browser's frame limit. */
const UPLOAD_FRAME_BYTES = 56 * 1024;
/** Frames per part: a part stays well under canvasd's default request limit (1 MiB). */
const UPLOAD_FRAMES_PER_PART = 14;

function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export class Documents {
  /**
   * @param {import('./request-channel.js').RequestChannel} requests reads go straight to it
   * @param {(method: string, params: Record<string, unknown>, options?: {attachments?: Uint8Array[], timeoutMs?: number}) => Promise<any>} write
   *   sends a request that changes a document in the page's session, so that a retry after a
   *   reconnect is answered from the session's replies instead of saving twice (spec §2.4)
   */
  constructor(requests, write) {
    this.requests = requests;
    this.write = write;
  }

  /** @returns {Promise<any[]>} */
  list() { return this.requests.call('document.list').then((result) => result.documents); }

  /** @param {string} name */
  info(name) { return this.requests.call('document.info', { name }); }

  /** @param {string} name */
  revisions(name) { return this.requests.call('document.revisions', { name }); }

  /**
   * @param {string} name
   * @param {number} revision
   * @param {{expectedRevision?: number}} options
   */
  restore(name, revision, { expectedRevision } = {}) {
    /** @type {Record<string, unknown>} */
    const params = { name, revision };
    if (expectedRevision !== undefined) params.expectedRevision = expectedRevision;
    return this.write('document.restore', params);
  }

  /**
   * Flattens a drawing into a page in one request. A drawing too large for one browser frame
   * cannot be split here: draw it in a session (open on the page, add strokes, submit) instead.
   * @param {string} name
   * @param {number} page
   * @param {any} drawing
   * @param {{expectedRevision?: number, inkForm?: 'paper' | 'annotations'}} options
   */
  flatten(name, page, drawing, { expectedRevision, inkForm } = {}) {
    /** @type {Record<string, unknown>} */
    const params = { name, page, drawing };
    if (expectedRevision !== undefined) params.expectedRevision = expectedRevision;
    if (inkForm !== undefined) params.inkForm = inkForm;
    return this.write('document.flatten', params).catch((error) => {
      if (error.code === 'TOO_LARGE_FOR_BROWSER') {
        error.message += '; document.flatten takes the drawing whole: open a canvas on the page, add its strokes and submit';
      }
      throw error;
    });
  }

  /**
   * The bytes of the current revision, or of `revision` (1 is the original), fetched in
   * pieces of `pieceBytes` and checked against the sha256 the server names.
   * Resolves to {name, revision, size, sha256, bytes}.
   * @param {string} name
   * @param {{revision?: number, pieceBytes?: number, onProgress?: (progress: {received: number, size: number}) => void}} options
   */
  async get(name, { revision, pieceBytes = 4 << 20, onProgress } = {}) {
    let offset = 0;
    /** @type {any} */
    let first;
    let bytes = new Uint8Array(0);
    do {
      /** @type {Record<string, unknown>} */
      const params = { name, offset, length: pieceBytes };
      const pinned = revision ?? first?.revision;
      if (pinned !== undefined) params.revision = pinned;
      const piece = await this.requests.call('document.get', params);
      if (!first) {
        first = piece;
        bytes = new Uint8Array(piece.size);
      } else if (piece.sha256 !== first.sha256) {
        throw new CanvasError('INTEGRITY', 'the revision changed while it was being fetched', { name }, 'document.get');
      }
      const data = base64ToBytes(piece.data);
      bytes.set(data, piece.offset);
      offset = piece.offset + data.length;
      onProgress?.({ received: offset, size: piece.size });
      if (data.length === 0 && offset < piece.size) {
        throw new CanvasError('INTEGRITY', 'the server sent an empty piece before the end', { name, offset }, 'document.get');
      }
    } while (offset < first.size);
    const hash = await sha256Hex(bytes);
    if (hash !== first.sha256) {
      throw new CanvasError('INTEGRITY', `the bytes hash to ${hash}, not ${first.sha256}`, { name, expected: first.sha256, actual: hash },
        'document.get');
    }
    return { name: first.name, revision: first.revision, size: first.size, sha256: first.sha256, bytes };
  }

  /**
   * Uploads `bytes` (a Uint8Array) as a new document `name`, or, with `expectedRevision`, as
   * the next revision of an existing one. The server checks the whole file (a damaged,
   * encrypted or non-PDF file is refused and nothing is stored) before it stores it atomically.
   * A dropped connection resumes from what the server has. Resolves to the document's summary.
   * @param {string} name
   * @param {Uint8Array} bytes
   * @param {{expectedRevision?: number, onProgress?: (progress: {sent: number, size: number}) => void}} options
   */
  async upload(name, bytes, { expectedRevision, onProgress } = {}) {
    const sha256 = await sha256Hex(bytes);
    /** @type {Record<string, unknown>} */
    const params = { name, size: bytes.length, sha256 };
    if (expectedRevision !== undefined) params.expectedRevision = expectedRevision;
    const begun = await this.write('document.upload.begin', params);
    const upload = begun.upload;
    let offset = begun.received ?? 0;
    const partBytes = Math.min(begun.partBytes ?? Infinity, UPLOAD_FRAME_BYTES * UPLOAD_FRAMES_PER_PART);
    try {
      while (offset < bytes.length) {
        const end = Math.min(offset + partBytes, bytes.length);
        const frames = [];
        for (let at = offset; at < end; at += UPLOAD_FRAME_BYTES) {
          frames.push(bytes.subarray(at, Math.min(at + UPLOAD_FRAME_BYTES, end)));
        }
        let result;
        try {
          result = await this.write('document.upload.part', { upload, offset }, { attachments: frames });
        } catch (/** @type {any} */ error) {
          // Out of step (a part lost or sent twice): carry on from what the server holds.
          if (error.code !== 'CONFLICT' || typeof error.data?.received !== 'number') throw error;
          result = error.data;
        }
        offset = result.received;
        onProgress?.({ sent: offset, size: bytes.length });
      }
      return await this.write('document.upload.commit', { upload }, { timeoutMs: 130000 });
    } catch (error) {
      this.write('document.upload.abort', { upload }).catch(() => {});
      throw error;
    }
  }
}
