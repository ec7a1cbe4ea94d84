// Types of canvas-bridge.js, the canvas plugin's API over canvasd's ws:// endpoints.
// Checked by `tsc --noEmit` in `make test` (clients/web/tsconfig.json), and the .js against
// it: canvas-bridge.js declares its exports with these types (checkJs).

/** Why a call failed: the protocol's code (INVALID_STATE, NOT_FOUND, CONFLICT, ...) or the
 * client's own (TIMEOUT, DISCONNECTED, SESSION_LOST, TOO_LARGE_FOR_BROWSER, INTEGRITY), with the
 * details. DISCONNECTED with `data.outcome: 'unknown'`: a write without a session was cut off
 * after it was sent, and is not sent again (it may or may not have been carried out).
 * SESSION_LOST: the session went away (a restart without a session store, an expiry) before
 * the call was answered; `data.newSession` is the session calls go to now. */
export class CanvasError extends Error {
  readonly name: 'CanvasError';
  readonly code: ErrorCode;
  data: Record<string, any>;
  readonly method?: string;
  constructor(code: ErrorCode, message: string, data?: Record<string, unknown>, method?: string);
}

export type ErrorCode =
  | 'PARSE_ERROR' | 'INVALID_REQUEST' | 'METHOD_NOT_FOUND' | 'INVALID_PARAMS' | 'INVALID_STATE'
  | 'UNKNOWN_SESSION' | 'UNAVAILABLE' | 'NOT_FOUND' | 'CONFLICT' | 'PAYLOAD_TOO_LARGE' | 'INTERNAL'
  | 'UNAUTHORIZED' | 'TIMEOUT' | 'DISCONNECTED' | 'SESSION_LOST' | 'TOO_LARGE_FOR_BROWSER' | 'INTEGRITY';

/** The largest frame a browser sends (Chromium fragments larger ones, and libzmq drops those). */
export const MAX_FRAME_BYTES: number;

export type CanvasState = 'closed' | 'opening' | 'open' | 'minimizing' | 'minimized';
/** A named colour (black, blue, red, purple, green, yellow, orange, white) or #RRGGBB. */
export type Color = string;

export interface CanvasResult {
  action: 'submitted' | 'minimized' | 'cancelled';
  hasContent: boolean;
  /** A PNG, base64, when asked for with `imageData: true`. */
  imageData?: string;
  /**
   * Why an image that was asked for is not there: it could not be rendered beside the server's
   * request loop now (`busy`, `ownerBusy`), its render passed the server's time budget
   * (`timeout`, `limits.imageTimeBudgetMs`), or, in a `canvas.result` event, it was too large
   * for an event (`tooLarge`; the reply that asked for it has it).
   */
  imageOmitted?: 'busy' | 'ownerBusy' | 'timeout' | 'renderFailed' | 'tooLarge';
  state?: CanvasState;
  /** After a submit into a document: the revision it made. */
  document?: DocumentSummary;
}

export interface CanvasResultEvent extends CanvasResult {
  /** Who caused it: the page ('client') or the pencil double-tap ('pencil'). */
  cause: 'client' | 'pencil' | string;
}

export interface StateChangedEvent { from: CanvasState; to: CanvasState; state: CanvasState; cause: string; }
export interface PencilDoubleTapEvent { outcome: 'opened' | 'minimized' | 'ignored' | string; reason?: string; }
export interface DocumentSavedEvent extends DocumentSummary { cause: string; session?: string; }
export interface ConnectionChangedEvent { channel: 'requests' | 'events'; connected: boolean; }
export interface EventsLostEvent { stream: string; expected: number; received: number; missed: number | null; restarted?: boolean; }
export interface SessionRestoredEvent {
  sessionLost?: boolean;
  session?: string;
  previousSession?: string;
  /** With the session kept: how many of its events passed while disconnected. */
  eventsMissed?: number;
  /** With the session lost (canvasd restarted): what the page had, as far as the replies told. */
  lost?: { state: CanvasState; strokes: number; texts: number; target: { document: string; page: number } | null; eventsAfterSeq: number };
  /** With `restore: 'replay'`: what was sent again in the new session (the open, every
   * acknowledged edit, a minimize), and the counts and state it ended with; `error` if a request
   * of the replay was refused (the rest was not sent). */
  replayed?: { requests: number; strokes: number; texts: number; state: CanvasState; error: CanvasError | null };
  error?: CanvasError;
}

export interface ListenerEvents {
  canvasResult: CanvasResultEvent;
  stateChanged: StateChangedEvent;
  pencilDoubleTap: PencilDoubleTapEvent;
  documentSaved: DocumentSavedEvent;
  connectionChanged: ConnectionChangedEvent;
  eventsLost: EventsLostEvent;
  sessionRestored: SessionRestoredEvent;
}

export interface PluginListenerHandle { remove(): Promise<void>; }

export interface InkPoint { x: number; y: number; pressure?: number; }
export interface Stroke { tool: 'pen' | 'highlighter'; color: Color; width: number; points: InkPoint[]; }
export interface TextAnnotation { text: string; x: number; y: number; fontSize: number; color: Color; }
export interface Drawing { strokes: Stroke[]; texts: TextAnnotation[]; }
export interface DrawingState extends Drawing { canUndo: boolean; canRedo: boolean; }
export interface EditResult { changed: boolean; canUndo: boolean; canRedo: boolean; strokes: number; texts: number; }
/** `pieces`: how many strokes the stroke became (more than one past `limits.maxPointsPerStroke`). */
export interface StrokeResult extends EditResult { pieces: number; }
export interface TextChange { x?: number; y?: number; dx?: number; dy?: number; fontSize?: number; color?: Color; text?: string; }

export interface DocumentSummary { name: string; revision: number; pageCount: number; sha256: string; }
export interface DocumentListEntry extends Partial<DocumentSummary> { name: string; problem?: { reason: string; message: string }; }
export interface DocumentInfo extends DocumentSummary {
  pages: { width: number; height: number; rotation: number }[];
  metadata?: Record<string, unknown>;
}
export interface DocumentRevisions {
  name: string;
  revisions: { revision: number; bytes: number; modified: string; current: boolean; sha256: string }[];
}
export interface DocumentBytes { name: string; revision: number; size: number; sha256: string; bytes: Uint8Array; }

export interface Documents {
  list(): Promise<DocumentListEntry[]>;
  info(name: string): Promise<DocumentInfo>;
  revisions(name: string): Promise<DocumentRevisions>;
  restore(name: string, revision: number, options?: { expectedRevision?: number }): Promise<DocumentSummary>;
  /** One request: a drawing too large for a browser frame is refused with TOO_LARGE_FOR_BROWSER. */
  /** `inkForm` (canvas/1.8): 'paper' (the default) or 'annotations' (spec 5.3). */
  flatten(name: string, page: number, drawing: Drawing, options?: { expectedRevision?: number; inkForm?: InkForm }): Promise<DocumentSummary>;
  /** The current revision, or `revision` (1 is the original), in pieces, sha256-checked. */
  get(name: string, options?: { revision?: number; pieceBytes?: number;
    onProgress?: (progress: { received: number; size: number }) => void }): Promise<DocumentBytes>;
  /** A new document, or with `expectedRevision` the next revision of one; sent in parts, checked by the server. */
  upload(name: string, bytes: Uint8Array, options?: { expectedRevision?: number;
    onProgress?: (progress: { sent: number; size: number }) => void }): Promise<DocumentSummary>;
}

export interface SessionOptions {
  transitions?: 'instant' | 'manual' | { ms: number };
  pencil?: { supported?: boolean; preferredTapAction?: string; policy?: 'alwaysToggle' | 'respectPreference' };
  initialized?: boolean;
  resultImages?: boolean;
  size?: { width: number; height: number };
}

export interface ConnectOptions {
  /** canvasd's --web-endpoint, e.g. ws://127.0.0.1:5580 */
  url: string;
  /** canvasd's --web-events, e.g. ws://127.0.0.1:5581 */
  events: string;
  /** An access token from canvasd's --web-tokens file, when it has one. */
  token?: string;
  /** How long a request waits for its reply (default 10 s); also how long connect() and a call
   * made while disconnected wait for canvasd. */
  timeoutMs?: number;
  session?: SessionOptions;
  /** What happens when canvasd lost the session (restarted without a session store):
   * 'report' (default) opens a new, empty session and says what was lost in `sessionRestored`;
   * 'replay' opens it on the same target and sends again what the server had acknowledged
   * (the open, the strokes and texts and their edits, a minimize). Either way calls waiting
   * for the lost session fail with SESSION_LOST unless the replay made them meaningful again. */
  restore?: 'report' | 'replay';
}

/** How a save puts ink on a page: into its content, or as standard annotations (spec 5.3). */
export type InkForm = 'paper' | 'annotations';

/** What `open` resolves to; `reopened` only for an open with `reopen: true` from closed. */
export interface OpenResult {
  state: CanvasState;
  /** How many pieces of canvas ink the drawing was loaded from (one a paper save, one an
   * annotation; 0 for a page without canvas ink), and the strokes and texts it holds. */
  reopened?: { edits: number; strokes: number; texts: number; otherInk?: number };
}

export interface HelloResult { protocol: string; server: string; methods: string[]; limits: Record<string, number>; }

export interface CanvasPlugin {
  readonly session: string;
  readonly server: HelloResult;
  readonly documents: Documents;

  initialize(): Promise<{ state: CanvasState }>;
  /**
   * Opens the canvas, on `page` (from 0) of `document` when given. `reopen: true` (canvas/1.8,
   * needs `document`) opens a closed canvas with the page's canvas ink (every stroke and text
   * earlier saves put there, exactly as sent) as its drawing, with no undo history; the result
   * then has `reopened`. Its submit replaces that ink on the page instead of adding a copy, and
   * fails CONFLICT (`data.reason: 'inkChanged'`) when that ink is no longer there. On an open or
   * minimized canvas it is a plain open if the drawing was reopened from that page, else CONFLICT
   * (`data.reason: 'notReopened'`). A server before 1.8 ignores `reopen` and opens an empty drawing
   * (no `reopened`). `reopen: 'all'` loads other programs' /Ink annotations of the page too
   * (`reopened.otherInk` says how many), which the submit then replaces, carrying their authors.
   * `inkForm` (canvas/1.8, needs `document`): how the submit puts the ink on the
   * page, 'paper' (the default) or 'annotations' (spec 5.3).
   */
  open(options?: { document?: string; page?: number; size?: { width: number; height: number }; reopen?: boolean | 'all'; inkForm?: InkForm }): Promise<OpenResult>;
  minimize(options?: { imageData?: boolean }): Promise<CanvasResult>;
  submit(options?: { imageData?: boolean }): Promise<CanvasResult>;
  cancel(options?: { imageData?: boolean }): Promise<CanvasResult>;
  doubleTap(): Promise<{ outcome: string; state: CanvasState; reason?: string; canvasResult?: CanvasResult }>;
  configurePencil(pencil: SessionOptions['pencil'] & { initialized?: boolean }): Promise<Record<string, unknown>>;
  finishTransition(): Promise<{ state: CanvasState }>;
  state(): Promise<{ state: CanvasState; hasContent: boolean; seq: number; [key: string]: unknown }>;

  /** As Capacitor 3+: a promise of the handle; the listener is in place at once. The promise
   * carries `remove()` itself too, as Capacitor 3 and 4 return it. */
  addListener<E extends keyof ListenerEvents>(event: E, fn: (data: ListenerEvents[E]) => void): Promise<PluginListenerHandle> & PluginListenerHandle;
  removeAllListeners(): Promise<void>;

  /**
   * A stroke of more points than the server's `limits.maxPointsPerStroke` (from `hello`)
   * becomes several strokes, each within it, each after the first starting at the point where
   * the one before ended (so `pieces` strokes, and `pieces - 1` points twice), the pieces after
   * the first `joined` to its undo step, so one undo takes the whole stroke back and one redo
   * brings it back; a stroke too long for one browser frame is sent in `continued` parts. A
   * refused part never waits on the server to be joined to the next stroke. A stroke is all or
   * nothing: when a piece is refused the pieces before it are undone (one undo step, so they sit
   * on the redo stack; a server that ignores `joined` made one step of each, and each is
   * undone), and `error.data` has `piece` (which failed), `pieces` and `undone` (the undo
   * requests it took).
   */
  addStroke(stroke: { tool?: 'pen' | 'highlighter'; color?: Color; width?: number; points: InkPoint[] }): Promise<StrokeResult>;
  addText(text: { text: string; x: number; y: number; fontSize?: number; color?: Color }): Promise<EditResult>;
  editText(index: number, changes: TextChange): Promise<EditResult>;
  moveText(index: number, to: { x: number; y: number }): Promise<EditResult>;
  nudgeText(index: number, dx: number, dy: number): Promise<EditResult>;
  /** 8 to 48 pt. */
  resizeText(index: number, fontSize: number): Promise<EditResult>;
  recolorText(index: number, color: Color): Promise<EditResult>;
  retext(index: number, text: string): Promise<EditResult>;
  erase(at: { x: number; y: number; radius?: number; mode?: 'stroke' | 'partial' }): Promise<EditResult>;
  undo(): Promise<EditResult>;
  redo(): Promise<EditResult>;
  clear(): Promise<EditResult>;
  getDrawing(): Promise<DrawingState>;

  /** Any session method by name. */
  call(method: string, params?: Record<string, unknown>, options?: { timeoutMs?: number }): Promise<any>;
  /** Closes the session and both connections at once (waits at most a second for the
   * session.close reply); canvasd lets go of both connections right away. */
  close(): Promise<void>;
}

/** The strokes a stroke becomes under a server's `maxPointsPerStroke` (as addStroke sends them). */
export function splitStroke(points: InkPoint[], maxPoints: number): InkPoint[][];
/**
 * The points on the ink's grid (0.01 pt, 0.001 of pressure), as `addStroke` sends them: what the
 * page keeps and a reopen gives back; a number off it is stored whole (spec 5.2).
 */
export function onInkGrid(points: InkPoint[]): InkPoint[];

/** Connects to canvasd over ws:// and opens a session; rejects with TIMEOUT when canvasd cannot be reached within `timeoutMs`. */
export function connect(options: ConnectOptions): Promise<CanvasPlugin>;
