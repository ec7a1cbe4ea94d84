// The life of one connection to canvasd, as a pure machine: a phase and an event in, the next
// phase and the actions to carry out out. Both channels (requests, events) run it through
// Connection (connection.js), so reconnecting and its backoff are written once.

/** @typedef {'connecting' | 'greeting' | 'ready' | 'reconnecting' | 'closed'} Phase */
/** @typedef {'socketOpened' | 'greeted' | 'socketClosed' | 'retryDue' | 'close'} ConnectionEvent */
/**
 * @typedef {{ kind: 'openSocket' } | { kind: 'sendRoutingId' } | { kind: 'announceUp' }
 *   | { kind: 'announceDown' } | { kind: 'scheduleRetry', delayMs: number } | { kind: 'closeSocket' }
 *   | { kind: 'announceClosed' }} ConnectionAction
 */
/** @typedef {{ phase: Phase, failures: number }} ConnectionState */

/** The first pause before a retry, and the longest: a restarting canvasd is back within these. */
export const FIRST_RETRY_MS = 100;
export const LONGEST_RETRY_MS = 2000;

/**
 * The pause before the next attempt after `failures` attempts in a row that never got ready.
 * @param {number} failures
 * @returns {number}
 */
export function backoff(failures) {
  return Math.min(FIRST_RETRY_MS * 2 ** Math.max(0, failures - 1), LONGEST_RETRY_MS);
}

/** @returns {{ state: ConnectionState, actions: ConnectionAction[] }} the start: a socket is opened. */
export function start() {
  return { state: { phase: 'connecting', failures: 0 }, actions: [{ kind: 'openSocket' }] };
}

/**
 * @param {ConnectionState} state
 * @param {ConnectionEvent} event
 * @returns {{ state: ConnectionState, actions: ConnectionAction[] }}
 */
export function step(state, event) {
  const { phase, failures } = state;
  if (phase === 'closed') return { state, actions: [] };
  if (event === 'close') {
    const actions = /** @type {ConnectionAction[]} */ ([{ kind: 'closeSocket' }]);
    if (phase === 'ready') actions.push({ kind: 'announceDown' });
    actions.push({ kind: 'announceClosed' });
    return { state: { phase: 'closed', failures }, actions };
  }
  switch (phase) {
    case 'connecting':
      if (event === 'socketOpened') return { state: { phase: 'greeting', failures }, actions: [{ kind: 'sendRoutingId' }] };
      if (event === 'socketClosed') return retry(failures + 1, []);
      break;
    case 'greeting':
      // The server's routing id: the connection carries requests from now on.
      if (event === 'greeted') return { state: { phase: 'ready', failures: 0 }, actions: [{ kind: 'announceUp' }] };
      if (event === 'socketClosed') return retry(failures + 1, []);
      break;
    case 'ready':
      if (event === 'socketClosed') return retry(1, [{ kind: 'announceDown' }]);
      break;
    case 'reconnecting':
      if (event === 'retryDue') return { state: { phase: 'connecting', failures }, actions: [{ kind: 'openSocket' }] };
      break;
    default:
      break;
  }
  // Anything else (a late event of a socket already given up) changes nothing.
  return { state, actions: [] };
}

/**
 * @param {number} failures
 * @param {ConnectionAction[]} before
 * @returns {{ state: ConnectionState, actions: ConnectionAction[] }}
 */
function retry(failures, before) {
  return {
    state: { phase: 'reconnecting', failures },
    actions: [...before, { kind: 'scheduleRetry', delayMs: backoff(failures) }],
  };
}
