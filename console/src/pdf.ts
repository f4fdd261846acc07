// pdf.js, loaded only when a PDF is opened. Its worker is a file of this origin (the CSP allows no other),
// and eval is off: the page's policy has no 'unsafe-eval'.
import 'pdfjs-dist/web/pdf_viewer.css';
import * as pdfjs from 'pdfjs-dist';
import workerUrl from 'pdfjs-dist/build/pdf.worker.min.mjs?url';

pdfjs.GlobalWorkerOptions.workerSrc = workerUrl;

export type PdfDocument = pdfjs.PDFDocumentProxy;

export function openPdf(url: string): Promise<PdfDocument> {
  return pdfjs.getDocument({ url, isEvalSupported: false }).promise;
}

/** Render page `number` into `container`, `width` pixels wide at most: a canvas and its text layer; returns
 * the text layer's elements in reading order. */
export async function renderPage(document: PdfDocument, number: number, container: HTMLElement, width: number): Promise<HTMLElement[]> {
  const page = await document.getPage(number);
  const unscaled = page.getViewport({ scale: 1 });
  const scale = Math.min(2, Math.max(0.5, width / unscaled.width));
  const viewport = page.getViewport({ scale });
  const ratio = window.devicePixelRatio || 1;
  const canvas = container.ownerDocument.createElement('canvas');
  canvas.width = Math.floor(viewport.width * ratio);
  canvas.height = Math.floor(viewport.height * ratio);
  canvas.style.width = `${Math.floor(viewport.width)}px`;
  canvas.style.height = `${Math.floor(viewport.height)}px`;
  canvas.setAttribute('aria-hidden', 'true');
  const layer = container.ownerDocument.createElement('div');
  layer.className = 'textLayer';
  container.style.setProperty('--scale-factor', String(scale));
  container.style.setProperty('--user-unit', '1');
  container.style.setProperty('--total-scale-factor', String(scale));
  container.style.width = `${Math.floor(viewport.width)}px`;
  container.style.height = `${Math.floor(viewport.height)}px`;
  container.replaceChildren(canvas, layer);
  await page.render({
    canvas,
    canvasContext: canvas.getContext('2d')!,
    viewport,
    transform: ratio === 1 ? undefined : [ratio, 0, 0, ratio, 0, 0],
  }).promise;
  const text = new pdfjs.TextLayer({ textContentSource: page.streamTextContent(), container: layer, viewport });
  await text.render();
  return text.textDivs;
}
