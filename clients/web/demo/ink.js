// Ink on the demo's canvas, drawn the way canvasd's renderer draws it into the PDF: a
// Catmull-Rom curve through the points, a pen's width scaled by pressure (0.3 to 1.7 times the
// set width; half pressure draws the set width), round caps and joins, and a highlighter as one
// stroke of the set width multiplied into the page below.

const NAMED = { black: '#000000', blue: '#0000ff', red: '#ff0000', purple: '#800080', green: '#008000',
  yellow: '#ffff00', orange: '#ffa500', white: '#ffffff' };

export function cssColor(color) { return NAMED[color] ?? color; }

function pressureFactor(pressure) { return pressure === undefined || pressure === null ? 1 : 0.3 + 1.4 * pressure; }

/** Points along the Catmull-Rom curve through `points`, each with its radius. */
function smoothed(stroke, ignoringPressure) {
  const points = stroke.points;
  const radius = (p) => stroke.width * (ignoringPressure ? 1 : pressureFactor(p.pressure)) / 2;
  const out = [{ x: points[0].x, y: points[0].y, r: radius(points[0]) }];
  for (let i = 0; i + 1 < points.length; i++) {
    const p0 = points[Math.max(0, i - 1)], p1 = points[i], p2 = points[i + 1], p3 = points[Math.min(points.length - 1, i + 2)];
    const length = Math.hypot(p2.x - p1.x, p2.y - p1.y);
    const steps = Math.max(1, Math.ceil(length / Math.max(0.5, Math.min(radius(p1), radius(p2)))));
    for (let s = 1; s <= steps; s++) {
      const t = s / steps, t2 = t * t, t3 = t2 * t;
      const x = 0.5 * (2 * p1.x + (-p0.x + p2.x) * t + (2 * p0.x - 5 * p1.x + 4 * p2.x - p3.x) * t2 + (-p0.x + 3 * p1.x - 3 * p2.x + p3.x) * t3);
      const y = 0.5 * (2 * p1.y + (-p0.y + p2.y) * t + (2 * p0.y - 5 * p1.y + 4 * p2.y - p3.y) * t2 + (-p0.y + 3 * p1.y - 3 * p2.y + p3.y) * t3);
      out.push({ x, y, r: radius(p1) + (radius(p2) - radius(p1)) * t });
    }
  }
  return out;
}

function drawPen(context, stroke) {
  const samples = smoothed(stroke, false);
  context.fillStyle = cssColor(stroke.color);
  context.strokeStyle = cssColor(stroke.color);
  context.lineCap = 'round';
  context.lineJoin = 'round';
  if (samples.length === 1) {
    context.beginPath();
    context.arc(samples[0].x, samples[0].y, samples[0].r, 0, 2 * Math.PI);
    context.fill();
    return;
  }
  // One segment per sample pair, each at its local width: with round caps the joins are smooth.
  for (let i = 1; i < samples.length; i++) {
    context.beginPath();
    context.lineWidth = samples[i - 1].r + samples[i].r;
    context.moveTo(samples[i - 1].x, samples[i - 1].y);
    context.lineTo(samples[i].x, samples[i].y);
    context.stroke();
  }
}

function drawHighlighter(context, stroke) {
  const samples = smoothed(stroke, true);
  context.save();
  context.globalCompositeOperation = 'multiply';
  context.strokeStyle = cssColor(stroke.color);
  context.lineWidth = stroke.width;
  context.lineCap = 'round';
  context.lineJoin = 'round';
  context.beginPath();
  context.moveTo(samples[0].x, samples[0].y);
  for (const s of samples.slice(1)) context.lineTo(s.x, s.y);
  if (samples.length === 1) context.lineTo(samples[0].x, samples[0].y);
  context.stroke();
  context.restore();
}

/** Draws a drawing ({strokes, texts}) in page points on `context` (already scaled to points). */
export function drawInk(context, drawing, { selectedText } = {}) {
  for (const stroke of drawing.strokes) {
    if (stroke.tool === 'highlighter') drawHighlighter(context, stroke); else drawPen(context, stroke);
  }
  drawing.texts.forEach((text, index) => {
    context.fillStyle = cssColor(text.color);
    context.font = `${text.fontSize}px "DejaVu Sans", sans-serif`;
    context.textBaseline = 'top';
    text.text.split('\n').forEach((line, n) => context.fillText(line, text.x, text.y + n * text.fontSize * 1.17));
    if (index === selectedText) {
      const width = Math.max(...text.text.split('\n').map((line) => context.measureText(line).width));
      context.save();
      context.setLineDash([4, 3]);
      context.lineWidth = 1;
      context.strokeStyle = '#3b82f6';
      context.strokeRect(text.x - 2, text.y - 2, width + 4, text.fontSize * 1.17 * text.text.split('\n').length + 4);
      context.restore();
    }
  });
}
