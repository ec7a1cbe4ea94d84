// Keeps a page's calls going to a session that is there: runs the session machine
// (session-machine.js), holds calls while it finds out what became of the session after a
// dropped connection or an UNKNOWN_SESSION, and replaces a lost session, sending the
// acknowledged drawing again with `restore: 'replay'`.

import { STARTING, sessionStep } from './session-machine.js';
import { CanvasError } from './errors.js';
import { ReplayLog } from './replay-log.js';
import { frameParts } from './strokes.js';

/**
 * What the keeper needs of the plugin it serves.
 * @typedef {object} SessionHost
 * @property {import('./request-channel.js').RequestChannel} requests
 * @property {import('./event-channel.js').EventChannel} events
 * @property {string} session
 * @property {'report' | 'replay'} restore
 * @property {ReplayLog} log
 * @property {{state: string, strokes: number, texts: number, target: any}} known
 * @property {() => Promise<any>} openSession opens a new session and makes it `session`
 * @property {(method: string, params: Record<string, unknown>, result: any) => void} track
 * @property {(name: string, data: any) => void} emit
 */

/**
 * What became of a session the keeper checked: kept, or replaced by `session` (its drawing
 * `replayed` or not), or no answer.
 * @typedef {{ kept?: boolean, lost?: string, session?: string, replayed?: boolean }} Outcome
 */

/**
 * A promise and its two ends.
 * @template T
 */
class Gate {
  constructor() {
    this.settled = false;
    /** @type {(value: T) => void} */
    this.resolve = () => {};
    /** @type {(error: Error) => void} */
    this.reject = () => {};
    /** @type {Promise<T>} */
    this.promise = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.promise.catch(() => {});   // a gate nobody waited at is no unhandled rejection
  }
}

export class SessionKeeper {
  /** @param {SessionHost} host */
  constructor(host) {
    this.host = host;
    /** @type {import('./session-machine.js').SessionState} */
    this.state = STARTING;
    /** @type {Gate<string>} resolves to the session calls go to */
    this.gate = new Gate();
    /** @type {Promise<Outcome> | null} the check under way */
    this.checking = null;
    /** @type {Outcome | null} the last session replaced */
    this.replaced = null;
  }

  get phase() { return this.state.phase; }

  /** @param {import('./session-machine.js').SessionEvent} event */
  dispatch(event) {
    const next = sessionStep(this.state, event);
    this.state = next.state;
    for (const action of next.actions) {
      switch (action.kind) {
        case 'letCallsGo':
          if (this.gate.settled) this.gate = new Gate();
          this.gate.settled = true;
          this.gate.resolve(action.session);
          break;
        case 'holdCalls':
          if (this.gate.settled) this.gate = new Gate();
          break;
        case 'failWaiting':
          this.gate.settled = true;
          this.gate.reject(action.why === 'closed'
            ? new CanvasError('DISCONNECTED', 'the client was closed')
            : new CanvasError('SESSION_LOST', 'lost', { session: action.lost, newSession: action.session }));
          this.gate = new Gate();
          break;
        case 'checkSession':
          this.checking = this.check(action.session);
          break;
        case 'checkLater':
          setTimeout(() => this.dispatch({ kind: 'checkDue' }), 1000);
          break;
        default:
          break;
      }
    }
  }

  /**
   * The session to send `method` with, once calls can go (waiting at most `timeoutMs`).
   * @param {string} method
   * @param {number} timeoutMs
   * @returns {Promise<string>}
   */
  async usableSession(method, timeoutMs) {
    if (this.state.phase === 'ready') return this.state.session;
    if (this.state.phase === 'closed') throw new CanvasError('DISCONNECTED', 'the client was closed', {}, method);
    let timer;
    const gaveUp = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new CanvasError('TIMEOUT', `no connection to canvasd within ${timeoutMs} ms`,
        { timeoutMs, connected: this.host.requests.connected, sent: false }, method)), timeoutMs);
    });
    try {
      return await Promise.race([this.gate.promise, gaveUp]);
    } catch (error) {
      if (error instanceof CanvasError && error.code === 'SESSION_LOST') {
        throw lostError(method, error.data.session, { session: error.data.newSession, replayed: false });
      }
      if (error instanceof CanvasError && error.code === 'DISCONNECTED') throw new CanvasError('DISCONNECTED', 'the client was closed', {}, method);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What became of `session` after canvasd answered UNKNOWN_SESSION for it.
   * @param {string} session
   * @returns {Promise<Outcome>}
   */
  async afterUnknown(session) {
    this.dispatch({ kind: 'unknownSession', session });
    if (this.checking) return this.checking;
    if (this.replaced?.lost === session) return this.replaced;
    return { kept: false };
  }

  /**
   * Is `session` still there? If not, a new one (with the drawing sent again when replaying),
   * and `sessionRestored` says which.
   * @param {string} session
   * @returns {Promise<Outcome>}
   */
  async check(session) {
    const host = this.host;
    const before = { ...host.known };
    const lastSeq = host.events.lastSeq(session) ?? 0;
    try {
      try {
        const state = await host.requests.call('canvas.state', {}, { session });
        this.dispatch({ kind: 'kept' });
        host.emit('sessionRestored', { sessionLost: false, session, eventsMissed: Math.max(0, state.seq - lastSeq) });
        return { kept: true, session };
      } catch (error) {
        if (!(error instanceof CanvasError) || error.code !== 'UNKNOWN_SESSION') throw error;
      }
      const replay = host.restore === 'replay' ? host.log.requests() : [];
      await host.openSession();
      const fresh = host.session;
      /** @type {any} */
      const report = {
        sessionLost: true, previousSession: session, session: fresh,
        lost: { state: before.state, strokes: before.strokes, texts: before.texts, target: before.target, eventsAfterSeq: lastSeq },
      };
      if (host.restore === 'replay') report.replayed = await this.replay(fresh, replay);
      const replayed = host.restore === 'replay' && !report.replayed.error;
      this.replaced = { lost: session, session: fresh, replayed };
      this.dispatch({ kind: 'replaced', session: fresh, replayed });
      host.emit('sessionRestored', report);
      return this.replaced;
    } catch (error) {
      // No answer at all (the connection dropped again, a timeout): checked again later.
      this.dispatch({ kind: 'checkFailed', connected: host.requests.connected });
      host.emit('sessionRestored', { error });
      return { kept: false };
    } finally {
      this.checking = null;
    }
  }

  /**
   * Sends the logged requests in the new session; says what went.
   * @param {string} session
   * @param {import('./replay-log.js').LoggedRequest[]} requests
   */
  async replay(session, requests) {
    const host = this.host;
    const done = { requests: 0, strokes: 0, texts: 0, state: 'closed', error: /** @type {any} */ (null) };
    const log = new ReplayLog();
    for (const { method, params } of requests) {
      try {
        const result = method === 'drawing.addStroke'
          ? await this.replayStroke(session, params)
          : await host.requests.call(method, params, { session });
        log.answered(method, params, result);
        host.track(method, params, result);
        done.requests += 1;
        if (typeof result?.strokes === 'number') done.strokes = result.strokes;
        if (typeof result?.texts === 'number') done.texts = result.texts;
        // A replayed reopen loads the page's ink again, from the document as it now is.
        if (result?.reopened) {
          done.strokes = result.reopened.strokes;
          done.texts = result.reopened.texts;
        }
        if (typeof result?.state === 'string') done.state = result.state;
      } catch (error) {
        done.error = error;
        break;
      }
    }
    host.log = log;
    return done;
  }

  /**
   * A whole logged stroke, in frame-sized parts.
   * @param {string} session
   * @param {Record<string, unknown>} params
   */
  async replayStroke(session, params) {
    const { points, ...style } = params;
    const parts = frameParts(/** @type {any[]} */ (points));
    let result;
    for (let index = 0; index < parts.length; index++) {
      /** @type {Record<string, unknown>} */
      const part = { ...style, points: parts[index] };
      if (index < parts.length - 1) part.continued = true;
      result = await this.host.requests.call('drawing.addStroke', part, { session });
    }
    return result;
  }
}

/**
 * The error of a call whose session was lost before it was answered.
 * @param {string} method
 * @param {string} session
 * @param {Outcome} outcome
 */
export function lostError(method, session, outcome) {
  return new CanvasError('SESSION_LOST',
    `session ${session} was lost (canvasd restarted without a session store, or the session expired) before this request was answered; `
    + (outcome.session ? `calls now go to session ${outcome.session}` : 'no new session could be opened'),
    { session, newSession: outcome.session ?? null, replayed: !!outcome.replayed, outcome: 'unknown' }, method);
}
