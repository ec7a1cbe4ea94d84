// What a request still unanswered when the connection dropped becomes once it is back
// (spec §2.4): a read, or any request naming a session (answered from the session's reply
// cache), goes again with its id; a write without a session that may have reached canvasd is
// not sent again, because a repeat would do it twice.

/** Requests that change nothing, so sending them twice is harmless. */
const READS = new Set(['hello', 'document.list', 'document.info', 'document.revisions', 'document.get',
  'document.upload.status', 'canvas.state', 'drawing.get']);

/**
 * @param {string} method
 * @param {boolean} hasSession whether the request names a session
 * @param {boolean} sent whether it left the browser before the connection dropped
 * @returns {'resend' | 'outcomeUnknown'}
 */
export function afterReconnect(method, hasSession, sent) {
  if (!sent || hasSession || READS.has(method)) return 'resend';
  return 'outcomeUnknown';
}
