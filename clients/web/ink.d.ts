// Types of ink.js: a drawing drawn on a 2D canvas as canvasd's renderer will put it in the PDF
// (pen ink within the stroke's envelope of spec §4, texts on the renderer's baseline rule).
import type { Drawing, TextAnnotation, Color } from './canvas-bridge';

export const MIN_PRESSURE_FACTOR: number;
export const MAX_PRESSURE_FACTOR: number;
/** A text's first baseline is TEXT_ASCENT × fontSize below its y (DejaVu Sans: 1901/2048). */
export const TEXT_ASCENT: number;
export const TEXT_DESCENT: number;
/** Lines of a text are LINE_HEIGHT × fontSize apart (DejaVu Sans: 2384/2048). */
export const LINE_HEIGHT: number;
export const TEXT_FONT: string;

export interface Box { x: number; y: number; width: number; height: number; }

export function cssColor(color: Color): string;
/** Half the width, scaled by pressure: 0.3 to 1.7 times; no pressure draws the set width. */
export function penRadius(width: number, pressure: number | null | undefined): number;
export function textLines(text: TextAnnotation): { line: string; x: number; baseline: number }[];
export function textBox(context: CanvasRenderingContext2D, text: TextAnnotation): Box;
/** Draws `drawing` in page points; the context's transform maps page points to pixels. */
export function drawInk(context: CanvasRenderingContext2D, drawing: Drawing,
  options?: { selectedText?: number | null; hiddenText?: number | null }): void;
