"""The web client's pure modules run by Node directly (no browser, no server): the connection
machine, how a stroke is split, what a request becomes after a reconnect, and the replay log."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import ROOT

WEB = ROOT / "clients" / "web"


def node(script: str):
    """Runs `script` as an ES module beside the client's modules; returns what it prints as JSON."""
    assert shutil.which("node"), "no node: Debian's nodejs comes with node-typescript (make system-deps)"
    done = subprocess.run(["node", "--input-type=module", "-e", script], cwd=WEB, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_connection_machine_reconnects_with_one_backoff_and_stays_closed():
    trace = node("""
      import { start, step } from './connection-machine.js';
      let { state, actions } = start();
      const trace = [[state.phase, actions]];
      for (const event of ['socketOpened', 'greeted', 'socketClosed', 'retryDue', 'socketClosed', 'retryDue',
                           'socketOpened', 'socketClosed', 'retryDue', 'socketClosed', 'retryDue', 'socketClosed',
                           'retryDue', 'socketClosed', 'retryDue', 'socketClosed', 'retryDue', 'socketOpened', 'greeted',
                           'greeted', 'socketClosed', 'close', 'retryDue', 'socketOpened', 'close']) {
        ({ state, actions } = step(state, event));
        trace.push([event, state.phase, actions]);
      }
      console.log(JSON.stringify(trace));
    """)
    retry = lambda ms: {"kind": "scheduleRetry", "delayMs": ms}
    assert trace[0] == ["connecting", [{"kind": "openSocket"}]]
    assert trace[1:] == [
        ["socketOpened", "greeting", [{"kind": "sendRoutingId"}]],
        ["greeted", "ready", [{"kind": "announceUp"}]],
        ["socketClosed", "reconnecting", [{"kind": "announceDown"}, retry(100)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketClosed", "reconnecting", [retry(200)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketOpened", "greeting", [{"kind": "sendRoutingId"}]],
        ["socketClosed", "reconnecting", [retry(400)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketClosed", "reconnecting", [retry(800)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketClosed", "reconnecting", [retry(1600)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketClosed", "reconnecting", [retry(2000)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketClosed", "reconnecting", [retry(2000)]],
        ["retryDue", "connecting", [{"kind": "openSocket"}]],
        ["socketOpened", "greeting", [{"kind": "sendRoutingId"}]],
        ["greeted", "ready", [{"kind": "announceUp"}]],
        ["greeted", "ready", []],
        # Up again: the backoff starts over.
        ["socketClosed", "reconnecting", [{"kind": "announceDown"}, retry(100)]],
        ["close", "closed", [{"kind": "closeSocket"}, {"kind": "announceClosed"}]],
        ["retryDue", "closed", []],
        ["socketOpened", "closed", []],
        ["close", "closed", []],
    ]


def test_close_of_a_ready_connection_announces_it_down_and_closed():
    out = node("""
      import { start, step } from './connection-machine.js';
      let { state } = start();
      ({ state } = step(state, 'socketOpened'));
      ({ state } = step(state, 'greeted'));
      console.log(JSON.stringify(step(state, 'close')));
    """)
    assert out == {"state": {"phase": "closed", "failures": 0},
                   "actions": [{"kind": "closeSocket"}, {"kind": "announceDown"}, {"kind": "announceClosed"}]}


@pytest.mark.parametrize("n", [1, 2, 3, 9999, 10000, 10001, 19999, 20000, 20001, 50000])
def test_a_stroke_is_split_into_pieces_within_the_limit_that_join_into_it(n):
    out = node("""
      import { splitStroke, frameParts, PART_BYTES } from './strokes.js';
      const points = Array.from({ length: %d }, (_, i) => ({ x: i, y: i %% 7, pressure: (i %% 10) / 10 }));
      const pieces = splitStroke(points, 10000);
      const joined = pieces.flatMap((piece, i) => i === 0 ? piece : piece.slice(1));
      const starts = pieces.slice(1).every((piece, i) => piece[0] === pieces[i][pieces[i].length - 1]);
      const parts = pieces.map((piece) => frameParts(piece));
      console.log(JSON.stringify({ sizes: pieces.map((p) => p.length), same: joined.length === points.length && joined.every((p, i) => p === points[i]),
        starts, partsFit: parts.every((list) => list.every((part) => JSON.stringify(part).length <= PART_BYTES)),
        partsJoin: parts.every((list, k) => list.flat().length === pieces[k].length) }));
    """ % n)
    expected = 1 if n <= 10000 else -(-(n - 1) // 9999)
    assert len(out["sizes"]) == expected and all(1 <= size <= 10000 for size in out["sizes"])
    assert out["same"] and out["starts"] and out["partsFit"] and out["partsJoin"]


def test_what_a_request_becomes_after_a_reconnect():
    out = node("""
      import { afterReconnect } from './retry-policy.js';
      const rows = [];
      for (const method of ['hello', 'drawing.get', 'document.get', 'drawing.addStroke', 'canvas.submit',
                            'document.flatten', 'document.restore', 'document.upload.commit', 'session.open']) {
        for (const hasSession of [true, false]) for (const sent of [true, false]) rows.push([method, hasSession, sent, afterReconnect(method, hasSession, sent)]);
      }
      console.log(JSON.stringify(rows));
    """)
    unknown = {(m, s, sent) for m, s, sent, what in out if what == "outcomeUnknown"}
    assert unknown == {("drawing.addStroke", False, True), ("canvas.submit", False, True), ("document.flatten", False, True),
                       ("document.restore", False, True), ("document.upload.commit", False, True), ("session.open", False, True)}


def test_the_replay_log_keeps_what_the_canvas_has_since_it_was_opened():
    out = node("""
      import { ReplayLog } from './replay-log.js';
      const log = new ReplayLog();
      const seen = [];
      log.answered('drawing.addStroke', { points: [] }, {});   // before an open: nothing to keep
      seen.push(log.requests().length);
      log.answered('canvas.open', { document: 'a.pdf', page: 1 }, { state: 'open' });
      log.answered('drawing.addStroke', { points: [{ x: 1, y: 1 }], continued: true }, {});
      log.answered('drawing.addStroke', { points: [{ x: 1, y: 1 }, { x: 2, y: 2 }] }, {});
      log.answered('drawing.addText', { text: 't', x: 1, y: 1 }, {});
      log.answered('canvas.minimize', {}, { state: 'minimized' });
      seen.push(log.requests().map((r) => r.method));
      log.answered('pencil.doubleTap', {}, { outcome: 'opened' });
      log.answered('canvas.open', { document: 'a.pdf', page: 1 }, { state: 'open' });
      log.answered('drawing.undo', {}, {});
      seen.push(log.requests().map((r) => r.method));
      log.answered('canvas.submit', {}, { state: 'closed' });
      seen.push(log.requests().length);
      log.answered('pencil.doubleTap', {}, { outcome: 'opened' });
      seen.push(log.requests());
      console.log(JSON.stringify(seen));
    """)
    assert out == [
        0,
        ["canvas.open", "drawing.addStroke", "drawing.addText", "canvas.minimize"],
        ["canvas.open", "drawing.addStroke", "drawing.addText", "drawing.undo"],
        0,
        [{"method": "canvas.open", "params": {}}],
    ]


def test_the_session_machine_holds_calls_until_the_session_is_kept_replaced_or_lost():
    out = node("""
      import { STARTING, sessionStep } from './session-machine.js';
      const states = [STARTING, { phase: 'ready', session: 's1' }, { phase: 'recovering', session: 's1', checking: false },
                      { phase: 'recovering', session: 's1', checking: true }, { phase: 'closed' }];
      const events = [{ kind: 'opened', session: 's1' }, { kind: 'connectionDown' }, { kind: 'connectionUp' },
                      { kind: 'unknownSession', session: 's1' }, { kind: 'unknownSession', session: 's0' }, { kind: 'kept' },
                      { kind: 'replaced', session: 's2', replayed: true }, { kind: 'replaced', session: 's2', replayed: false },
                      { kind: 'checkFailed', connected: true }, { kind: 'checkFailed', connected: false }, { kind: 'checkDue' },
                      { kind: 'close' }];
      const table = {};
      for (const [i, state] of states.entries()) for (const event of events) {
        const { state: next, actions } = sessionStep(state, event);
        const name = event.kind + (event.session ? ':' + event.session : '') + (event.replayed === false ? ':bare' : '')
          + (event.connected === false ? ':offline' : '');
        table[`${i} ${name}`] = [next.phase + (next.session ? ':' + next.session : '') + (next.checking ? ':checking' : ''),
                                  actions.map((a) => a.kind + (a.session ? ':' + a.session : '') + (a.why ? ':' + a.why : ''))];
      }
      console.log(JSON.stringify(table));
    """)
    # Every state x event pair, and what it must become; anything not listed changes nothing.
    expected = {
        "0 opened:s1": ["ready:s1", ["letCallsGo:s1"]],
        "1 connectionDown": ["recovering:s1", ["holdCalls"]],
        "1 unknownSession:s1": ["recovering:s1:checking", ["holdCalls", "checkSession:s1"]],
        "2 connectionUp": ["recovering:s1:checking", ["checkSession:s1"]],
        "2 unknownSession:s1": ["recovering:s1:checking", ["checkSession:s1"]],
        "2 checkDue": ["recovering:s1:checking", ["checkSession:s1"]],
        "3 kept": ["ready:s1", ["letCallsGo:s1"]],
        "3 replaced:s2": ["ready:s2", ["letCallsGo:s2"]],
        "3 replaced:s2:bare": ["ready:s2", ["failWaiting:s2:lost", "letCallsGo:s2"]],
        "3 checkFailed": ["recovering:s1", ["checkLater"]],
        "3 checkFailed:offline": ["recovering:s1", []],
    }
    for state in range(4):
        expected[f"{state} close"] = ["closed", ["failWaiting:closed"]]
    unchanged = {0: "starting", 1: "ready:s1", 2: "recovering:s1", 3: "recovering:s1:checking", 4: "closed"}
    assert len(out) == 5 * 12
    for key, value in out.items():
        state = int(key.split()[0])
        assert value == expected.get(key, [unchanged[state], []]), (key, value)


def test_the_connection_machine_table_every_phase_and_event():
    out = node("""
      import { step } from './connection-machine.js';
      const phases = ['connecting', 'greeting', 'ready', 'reconnecting', 'closed'];
      const events = ['socketOpened', 'greeted', 'socketClosed', 'retryDue', 'close'];
      const table = {};
      for (const phase of phases) for (const event of events) {
        const { state, actions } = step({ phase, failures: 2 }, event);
        table[`${phase} ${event}`] = [state.phase, state.failures, actions.map((a) => a.kind + (a.delayMs ? ':' + a.delayMs : ''))];
      }
      console.log(JSON.stringify(table));
    """)
    expected = {
        "connecting socketOpened": ["greeting", 2, ["sendRoutingId"]],
        "connecting socketClosed": ["reconnecting", 3, ["scheduleRetry:400"]],
        "greeting greeted": ["ready", 0, ["announceUp"]],
        "greeting socketClosed": ["reconnecting", 3, ["scheduleRetry:400"]],
        "ready socketClosed": ["reconnecting", 1, ["announceDown", "scheduleRetry:100"]],
        "reconnecting retryDue": ["connecting", 2, ["openSocket"]],
        "ready close": ["closed", 2, ["closeSocket", "announceDown", "announceClosed"]],
    }
    for phase in ("connecting", "greeting", "reconnecting"):
        expected[f"{phase} close"] = ["closed", 2, ["closeSocket", "announceClosed"]]
    assert len(out) == 25
    for key, value in out.items():
        assert value == expected.get(key, [key.split()[0], 2, []]), (key, value)
