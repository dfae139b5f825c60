// Geometry for the dashboard's SVG line charts and topology graph: scales, ticks and paths, no DOM.

/** Round tick values covering [min, max], about `count` of them (1, 2 or 5 times a power of ten apart). */
export function niceTicks(min: number, max: number, count = 4): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [0];
  if (max < min) [min, max] = [max, min];
  if (max === min) {
    if (max === 0) return [0, 1];
    const pad = Math.abs(max) * 0.5;
    min -= pad;
    max += pad;
  }
  const raw = (max - min) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const first = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let v = first; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  if (ticks[ticks.length - 1]! < max) ticks.push(Number((ticks[ticks.length - 1]! + step).toPrecision(12)));
  return ticks;
}

export interface Point {
  x: number;
  y: number | null;
}

export interface Frame {
  width: number;
  height: number;
  /** Data ranges mapped to the frame; y grows upwards. */
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

export function scaleX(frame: Frame, x: number): number {
  const span = frame.x1 - frame.x0;
  return span === 0 ? frame.width / 2 : ((x - frame.x0) / span) * frame.width;
}

export function scaleY(frame: Frame, y: number): number {
  const span = frame.y1 - frame.y0;
  return span === 0 ? frame.height / 2 : frame.height - ((y - frame.y0) / span) * frame.height;
}

/** An SVG path through the points; a null y breaks the line (no sample there). */
export function linePath(points: readonly Point[], frame: Frame): string {
  let path = '';
  let pen = false;
  for (const p of points) {
    if (p.y === null || !Number.isFinite(p.y)) {
      pen = false;
      continue;
    }
    path += `${pen ? 'L' : 'M'}${scaleX(frame, p.x).toFixed(1)},${scaleY(frame, p.y).toFixed(1)}`;
    pen = true;
  }
  return path;
}

/** Round ticks in binary units (1, 2 or 5 KiB, MiB, GiB... apart), for byte counts. */
export function byteTicks(min: number, max: number, count = 4): number[] {
  const top = Math.max(Math.abs(min), Math.abs(max));
  const unit = top < 1024 ? 1 : 1024 ** Math.floor(Math.log(top) / Math.log(1024));
  return niceTicks(min / unit, max / unit, count).map((t) => t * unit);
}

/** A frame for series over [x0, x1] whose y range starts at 0 and covers every value (with round ticks). */
export function frameFor(series: readonly (readonly Point[])[], width: number, height: number, x0: number, x1: number, bytes = false): { frame: Frame; ticks: number[] } {
  let max = 0;
  let min = 0;
  for (const s of series) {
    for (const p of s) {
      if (p.y === null || !Number.isFinite(p.y)) continue;
      if (p.y > max) max = p.y;
      if (p.y < min) min = p.y;
    }
  }
  const ticks = (bytes ? byteTicks : niceTicks)(min, max === min ? min + 1 : max, 4);
  return { frame: { width, height, x0, x1, y0: ticks[0]!, y1: ticks[ticks.length - 1]! }, ticks };
}

/** Positions of `n` graph nodes on a circle (one node in the middle; the first at the top). */
export function circleLayout(n: number, width: number, height: number, margin: number): { x: number; y: number }[] {
  const cx = width / 2;
  const cy = height / 2;
  if (n === 1) return [{ x: cx, y: cy }];
  const r = Math.max(0, Math.min(width, height) / 2 - margin);
  return Array.from({ length: n }, (_, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / n;
    return { x: cx + r * Math.cos(angle), y: cy + r * Math.sin(angle) };
  });
}
