// Uses the declared API the way a web page would, so `tsc --noEmit` checks that the types fit
// together (listener payloads, results, errors). Never run; nothing imports it.
import { connect, splitStroke, CanvasError, CanvasResult, OpenResult, PluginListenerHandle, StrokeResult } from './canvas-bridge';
import { drawInk, textBox, TEXT_ASCENT } from './ink';

async function example(context: CanvasRenderingContext2D): Promise<void> {
  const Canvas = await connect({ url: 'ws://127.0.0.1:5580', events: 'ws://127.0.0.1:5581', restore: 'replay' });
  // Capacitor 3+: a promise of the handle.
  const handle: PluginListenerHandle = await Canvas.addListener('canvasResult', (result) => {
    const content: boolean = result.hasContent;
    void content;
  });
  // Capacitor 3 and 4 pages that do not await it keep working.
  const direct: PluginListenerHandle = Canvas.addListener('documentSaved', (saved) => console.log(saved.revision, saved.sha256));
  Canvas.addListener('sessionRestored', (report) => console.log(report.lost?.strokes, report.replayed?.strokes));
  await Canvas.open({ document: 'notes.pdf', page: 0 });
  const reopened: OpenResult = await Canvas.open({ document: 'notes.pdf', page: 0, reopen: true });
  if (reopened.reopened) console.log(reopened.reopened.edits, reopened.reopened.strokes, reopened.reopened.texts);
  const stroke: StrokeResult = await Canvas.addStroke({ points: [{ x: 1, y: 2, pressure: 0.5 }], color: 'blue', width: 3 });
  console.log(stroke.pieces, splitStroke([{ x: 1, y: 2 }], Canvas.server.limits.maxPointsPerStroke).length);
  await Canvas.resizeText(0, 24);
  const drawing = await Canvas.getDrawing();
  drawInk(context, drawing, { selectedText: 0 });
  console.log(textBox(context, drawing.texts[0]).height, TEXT_ASCENT);
  const result: CanvasResult = await Canvas.submit({ imageData: true });
  console.log(result.document?.revision);
  const fetched = await Canvas.documents.get('notes.pdf', { revision: 1 });
  const bytes: Uint8Array = fetched.bytes;
  await Canvas.documents.upload('copy.pdf', bytes);
  await handle.remove();
  await direct.remove();
  try {
    await Canvas.minimize();
  } catch (error) {
    if (error instanceof CanvasError && error.code === 'SESSION_LOST') console.log(error.data.newSession);
  }
  await Canvas.close();
}
void example;
