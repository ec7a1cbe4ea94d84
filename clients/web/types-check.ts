// Uses the declared API the way a web page would, so `tsc --noEmit` checks that the types fit
// together (listener payloads, results, errors). Never run; nothing imports it.
import { connect, CanvasError, CanvasResult, PluginListenerHandle } from './canvas-bridge';

async function example(): Promise<void> {
  const Canvas = await connect({ url: 'ws://127.0.0.1:5580', events: 'ws://127.0.0.1:5581' });
  const handle: PluginListenerHandle = Canvas.addListener('canvasResult', (result) => {
    const content: boolean = result.hasContent;
    void content;
  });
  Canvas.addListener('documentSaved', (saved) => console.log(saved.revision, saved.sha256));
  Canvas.addListener('sessionRestored', (report) => console.log(report.lost?.strokes));
  await Canvas.open({ document: 'notes.pdf', page: 0 });
  await Canvas.addStroke({ points: [{ x: 1, y: 2, pressure: 0.5 }], color: 'blue', width: 3 });
  await Canvas.resizeText(0, 24);
  const result: CanvasResult = await Canvas.submit({ imageData: true });
  console.log(result.document?.revision);
  const fetched = await Canvas.documents.get('notes.pdf', { revision: 1 });
  const bytes: Uint8Array = fetched.bytes;
  await Canvas.documents.upload('copy.pdf', bytes);
  await handle.remove();
  try {
    await Canvas.minimize();
  } catch (error) {
    if (error instanceof CanvasError && error.code === 'INVALID_STATE') console.log(error.data);
  }
}
void example;
