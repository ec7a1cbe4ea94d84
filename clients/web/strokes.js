// How a stroke goes over the wire (spec §1.2, §5): a stroke longer than the server's
// `maxPointsPerStroke` becomes several strokes, each within the limit, so none is refused for
// its length; each of those goes in `continued` parts small enough for one browser frame.

import { MAX_FRAME_BYTES } from './zws.js';

/** @typedef {{ x: number, y: number, pressure?: number }} InkPoint */

/** Room left in a frame for the request's envelope around a part's points. */
export const PART_BYTES = MAX_FRAME_BYTES - 2048;

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
