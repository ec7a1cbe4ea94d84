// Whether a page's calls can go to its session, as a pure machine: a state and an event in,
// the next state and the actions to carry out out. SessionKeeper (session-keeper.js) runs it.
// Calls go while `ready`; while `recovering` (the connection dropped, or the server did not
// know the session) they wait until a check says the session was kept, replaced with its
// drawing replayed, or lost.

/**
 * @typedef {{ phase: 'starting' } | { phase: 'ready', session: string }
 *   | { phase: 'recovering', session: string, checking: boolean } | { phase: 'closed' }} SessionState
 * @typedef {{ kind: 'opened', session: string } | { kind: 'connectionDown' } | { kind: 'connectionUp' }
 *   | { kind: 'unknownSession', session: string } | { kind: 'kept' }
 *   | { kind: 'replaced', session: string, replayed: boolean } | { kind: 'checkFailed', connected: boolean }
 *   | { kind: 'checkDue' } | { kind: 'close' }} SessionEvent
 * @typedef {{ kind: 'letCallsGo', session: string } | { kind: 'holdCalls' } | { kind: 'checkSession', session: string }
 *   | { kind: 'checkLater' } | { kind: 'failWaiting', why: 'lost', lost: string, session: string }
 *   | { kind: 'failWaiting', why: 'closed' }} SessionAction
 */

/** @type {SessionState} */
export const STARTING = { phase: 'starting' };

/**
 * @param {SessionState} state
 * @param {SessionEvent} event
 * @returns {{ state: SessionState, actions: SessionAction[] }}
 */
export function sessionStep(state, event) {
  const none = { state, actions: [] };
  if (state.phase === 'closed') return none;
  if (event.kind === 'close') return { state: { phase: 'closed' }, actions: [{ kind: 'failWaiting', why: 'closed' }] };
  switch (state.phase) {
    case 'starting':
      if (event.kind === 'opened') return ready(event.session, []);
      return none;   // connect() is still under way: it fails or opens by itself
    case 'ready':
      if (event.kind === 'connectionDown') {
        return { state: { phase: 'recovering', session: state.session, checking: false }, actions: [{ kind: 'holdCalls' }] };
      }
      if (event.kind === 'unknownSession' && event.session === state.session) {
        return checking(state.session, [{ kind: 'holdCalls' }]);
      }
      return none;   // a late UNKNOWN_SESSION for a session already replaced, or no change
    case 'recovering':
      if (!state.checking && (event.kind === 'connectionUp' || event.kind === 'checkDue'
        || (event.kind === 'unknownSession' && event.session === state.session))) {
        return checking(state.session, []);
      }
      if (state.checking && event.kind === 'kept') return ready(state.session, []);
      if (state.checking && event.kind === 'replaced') {
        // Calls that waited were meant for the lost session's canvas: without the drawing
        // replayed they fail and say why; with it they go to the new session.
        return ready(event.session, event.replayed ? [] : [{ kind: 'failWaiting', why: 'lost', lost: state.session, session: event.session }]);
      }
      if (state.checking && event.kind === 'checkFailed') {
        // No answer: the next reconnect checks again, or, still connected, a moment later.
        return { state: { ...state, checking: false }, actions: event.connected ? [{ kind: 'checkLater' }] : [] };
      }
      return none;
    default:
      return none;
  }
}

/**
 * @param {string} session
 * @param {SessionAction[]} before
 * @returns {{ state: SessionState, actions: SessionAction[] }}
 */
function ready(session, before) {
  return { state: { phase: 'ready', session }, actions: [...before, { kind: 'letCallsGo', session }] };
}

/**
 * @param {string} session
 * @param {SessionAction[]} before
 * @returns {{ state: SessionState, actions: SessionAction[] }}
 */
function checking(session, before) {
  return { state: { phase: 'recovering', session, checking: true }, actions: [...before, { kind: 'checkSession', session }] };
}
