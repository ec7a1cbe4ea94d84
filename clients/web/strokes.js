// How a stroke goes over the wire (spec §1.2, §5): a stroke longer than the server's
// `maxPointsPerStroke` becomes several strokes, each within the limit, so none is refused for
// its length; each of those goes in `continued` parts small enough for one browser frame.

import { MAX_FRAME_BYTES } from './zws.js';

/** @typedef {{ x: number, y: number, pressure?: number }} InkPoint */

/** Room left in a frame for the request's envelope around a part's points. */
export const PART_BYTES = MAX_FRAME_BYTES - 2048;

/**
 * The points on the grid the server keeps ink at on paper (0.01 pt, 0.001 of pressure; spec
 * 5.2): a pointer's coordinates carry digits nobody sees, and each number off that grid is
 * stored whole (8 bytes) so that a reopen gives it back, where one on it costs about a byte.
 * Anything not a finite number is left for the server to refuse.
 * @param {InkPoint[]} points
 * @returns {InkPoint[]}
 */
export function onInkGrid(points) {
  const grid = (value, steps) => (Number.isFinite(value) ? Math.round(value * steps) / steps : value);
  return points.map((point) => {
    if (point === null || typeof point !== 'object') return point;
    const placed = { ...point, x: grid(point.x, 100), y: grid(point.y, 100) };
    if (point.pressure !== undefined) placed.pressure = grid(point.pressure, 1000);
    return placed;
  });
}

/**
 * The strokes a stroke of `points` becomes: pieces of at most `maxPoints` points, each after
 * the first starting at the point where the one before ended, so the line has no gap.
 * @param {InkPoint[]} points
 * @param {number} maxPoints
 * @returns {InkPoint[][]}
 */
export function splitStroke(points, maxPoints) {
  if (points.length <= maxPoints || maxPoints < 2) return [points];
  const pieces = [];
  for (let start = 0; start < points.length - 1; start += maxPoints - 1) {
    pieces.push(points.slice(start, start + maxPoints));
  }
  return pieces;
}

/**
 * The `continued` parts of one stroke: runs of points whose JSON fits `budget` bytes.
 * @param {InkPoint[]} points
 * @param {number} [budget]
 * @returns {InkPoint[][]}
 */
export function frameParts(points, budget = PART_BYTES) {
  const parts = [];
  let part = [];
  let bytes = 0;
  for (const point of points) {
    const size = JSON.stringify(point).length + 1;
    if (part.length > 0 && bytes + size > budget) {
      parts.push(part);
      part = [];
      bytes = 0;
    }
    part.push(point);
    bytes += size;
  }
  parts.push(part);
  return parts;
}
