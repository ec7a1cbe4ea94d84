// A drawing as the PDF will show it, drawn on a 2D canvas without a round trip: the page's
// preview. canvasd's renderer puts a pen's ink within the stroke's envelope (spec §4: the discs
// around the points, each of the radius the point's pressure gives plus 0.5 pt, and the tapered
// capsules between them); this draws the capsules at each point's own radius, which is that
// envelope less its allowance, so the preview never shows ink the PDF will not have and misses
// at most the 0.5 pt the renderer's smoothing may move a line by. Texts follow the renderer's
// rule exactly (TEXT_ASCENT, LINE_HEIGHT).

/** The CSS colours of the named ones (spec §4). */
const NAMED = /** @type {Record<string, string>} */ ({ black: '#000000', blue: '#0000ff', red: '#ff0000',
  purple: '#800080', green: '#008000', yellow: '#ffff00', orange: '#ffa500', white: '#ffffff' });

/** A pen's width at no pressure and at full pressure, as a factor of its set width. */
export const MIN_PRESSURE_FACTOR = 0.3;
export const MAX_PRESSURE_FACTOR = 1.7;
/** DejaVu Sans (hhea, 2048 units per em): a text's first baseline is TEXT_ASCENT × fontSize
 * below its y, each next line LINE_HEIGHT × fontSize lower; TEXT_DESCENT below a baseline ends
 * a line's box. */
export const TEXT_ASCENT = 1901 / 2048;
export const TEXT_DESCENT = 483 / 2048;
export const LINE_HEIGHT = 2384 / 2048;
/** The font the renderer uses; a page without it previews texts in the nearest sans-serif. */
export const TEXT_FONT = '"DejaVu Sans", sans-serif';

/**
 * @typedef {{ x: number, y: number, pressure?: number | null }} InkPoint
 * @typedef {{ tool: string, color: string, width: number, points: InkPoint[] }} Stroke
 * @typedef {{ text: string, x: number, y: number, fontSize: number, color: string }} TextAnnotation
 * @typedef {{ strokes: Stroke[], texts: TextAnnotation[] }} Drawing
 * @typedef {{ x: number, y: number, width: number, height: number }} Box
 */

/**
 * The CSS colour of a drawing's colour (a name or #RRGGBB).
 * @param {string} color
 */
export function cssColor(color) { return NAMED[color] ?? color; }

/**
 * The radius of a pen's ink at a point: half its width, scaled by pressure (0.3 to 1.7 times;
 * half pressure, or none, draws the set width).
 * @param {number} width
 * @param {number | null | undefined} pressure
 */
export function penRadius(width, pressure) {
  const factor = pressure === undefined || pressure === null ? 1 : MIN_PRESSURE_FACTOR + (MAX_PRESSURE_FACTOR - MIN_PRESSURE_FACTOR) * pressure;
  return width * factor / 2;
}

/**
 * Adds to the current path the convex hull of two discs: a tapered capsule.
 * @param {CanvasRenderingContext2D} context
 * @param {InkPoint} a
 * @param {number} ra
 * @param {InkPoint} b
 * @param {number} rb
 */
function capsule(context, a, ra, b, rb) {
  const d = Math.hypot(b.x - a.x, b.y - a.y);
  if (d <= Math.abs(ra - rb)) {
    // One disc holds the other.
    const [c, r] = ra >= rb ? [a, ra] : [b, rb];
    context.moveTo(c.x + r, c.y);
    context.arc(c.x, c.y, r, 0, 2 * Math.PI);
    return;
  }
  const direction = Math.atan2(b.y - a.y, b.x - a.x);
  const spread = Math.acos((ra - rb) / d);   // where the tangents touch, from the direction
  context.moveTo(a.x + ra * Math.cos(direction + spread), a.y + ra * Math.sin(direction + spread));
  context.arc(a.x, a.y, ra, direction + spread, direction - spread + 2 * Math.PI);
  context.arc(b.x, b.y, rb, direction - spread, direction + spread);
  context.closePath();
}

/**
 * @param {CanvasRenderingContext2D} context
 * @param {Stroke} stroke
 */
function drawPen(context, stroke) {
  context.fillStyle = cssColor(stroke.color);
  const points = stroke.points;
  const radii = points.map((p) => penRadius(stroke.width, p.pressure));
  // Each capsule filled on its own: an opaque colour makes their union, whatever their winding.
  if (points.length === 1) {
    context.beginPath();
    capsule(context, points[0], radii[0], points[0], radii[0]);
    context.fill();
    return;
  }
  for (let i = 1; i < points.length; i++) {
    context.beginPath();
    capsule(context, points[i - 1], radii[i - 1], points[i], radii[i]);
    context.fill();
  }
}

/**
 * A highlighter: one line of the set width (no pressure), multiplied into what is below.
 * @param {CanvasRenderingContext2D} context
 * @param {Stroke} stroke
 */
function drawHighlighter(context, stroke) {
  const points = stroke.points;
  context.save();
  context.globalCompositeOperation = 'multiply';
  context.strokeStyle = cssColor(stroke.color);
  context.lineWidth = stroke.width;
  context.lineCap = 'round';
  context.lineJoin = 'round';
  context.beginPath();
  context.moveTo(points[0].x, points[0].y);
  for (const point of points.slice(1)) context.lineTo(point.x, point.y);
  if (points.length === 1) context.lineTo(points[0].x, points[0].y);
  context.stroke();
  context.restore();
}

/**
 * The lines of a text and where each one's baseline is.
 * @param {TextAnnotation} text
 * @returns {{ line: string, x: number, baseline: number }[]}
 */
export function textLines(text) {
  return text.text.split('\n').map((line, n) => ({
    line, x: text.x, baseline: text.y + TEXT_ASCENT * text.fontSize + n * LINE_HEIGHT * text.fontSize,
  }));
}

/**
 * The box a text takes, in page points: from its corner to its widest line's end and its last
 * line's descent (for hit tests and selection).
 * @param {CanvasRenderingContext2D} context
 * @param {TextAnnotation} text
 * @returns {Box}
 */
export function textBox(context, text) {
  context.save();
  context.font = `${text.fontSize}px ${TEXT_FONT}`;
  const lines = textLines(text);
  const width = Math.max(...lines.map(({ line }) => context.measureText(line).width));
  context.restore();
  const last = lines[lines.length - 1];
  return { x: text.x, y: text.y, width, height: last.baseline + TEXT_DESCENT * text.fontSize - text.y };
}

/**
 * Draws a drawing in page points on `context`, whose transform already maps page points to
 * its pixels. `selectedText` outlines that text (by index); `hiddenText` leaves one out (a text
 * being edited in place).
 * (Typed by ink.d.ts, so `tsc` checks this against it.)
 * @type {typeof import('./ink').drawInk}
 */
export const drawInk = (context, drawing, { selectedText = null, hiddenText = null } = {}) => {
  for (const stroke of drawing.strokes) {
    if (stroke.tool === 'highlighter') drawHighlighter(context, stroke);
    else drawPen(context, stroke);
  }
  drawing.texts.forEach((text, index) => {
    if (index === hiddenText) return;
    context.save();
    context.fillStyle = cssColor(text.color);
    context.font = `${text.fontSize}px ${TEXT_FONT}`;
    context.textBaseline = 'alphabetic';
    context.textAlign = 'left';
    for (const { line, x, baseline } of textLines(text)) context.fillText(line, x, baseline);
    context.restore();
    if (index === selectedText) {
      const box = textBox(context, text);
      context.save();
      context.setLineDash([4, 3]);
      context.lineWidth = 1;
      context.strokeStyle = '#3b82f6';
      context.strokeRect(box.x - 2, box.y - 2, box.width + 4, box.height + 4);
      context.restore();
    }
  });
};
