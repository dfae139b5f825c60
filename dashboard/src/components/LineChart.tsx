// A small SVG line chart: several series over a time window, round y ticks, a legend with the latest
// values, and the values under the pointer.

import { useLayoutEffect, useRef, useState, type ReactNode } from 'react';
import { frameFor, linePath, scaleX, scaleY, type Point } from '../lib/chart.js';
import { formatClock } from '../lib/format.js';

export interface ChartSeries {
  label: string;
  /** A CSS colour (the palette variables work: `var(--c1)`). */
  color: string;
  points: Point[];
}

const PAD = { left: 52, right: 12, top: 10, bottom: 22 };

/** The width of the element, measured before the first paint and whenever it changes. */
function useWidth(): [React.RefObject<HTMLDivElement>, number] {
  const ref = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(0);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = (): void => setWidth(Math.max(200, Math.floor(el.getBoundingClientRect().width)));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

export function LineChart({ title, series, x0, x1, format, bytes = false, height = 160 }: { title: string; series: ChartSeries[]; x0: number; x1: number; format: (v: number) => string; bytes?: boolean; height?: number }): ReactNode {
  const [ref, width] = useWidth();
  const [hover, setHover] = useState<number | null>(null);
  const inner = { width: width - PAD.left - PAD.right, height: height - PAD.top - PAD.bottom };
  const { frame, ticks } = frameFor(
    series.map((s) => s.points),
    inner.width,
    inner.height,
    x0,
    x1,
    bytes,
  );
  const latest = (s: ChartSeries): number | null => {
    for (let i = s.points.length - 1; i >= 0; i -= 1) {
      const y = s.points[i]!.y;
      if (y !== null) return y;
    }
    return null;
  };
  const nearest = (s: ChartSeries, x: number): Point | null => {
    let best: Point | null = null;
    for (const p of s.points) if (p.y !== null && (!best || Math.abs(p.x - x) < Math.abs(best.x - x))) best = p;
    return best;
  };
  const onMove = (e: React.MouseEvent<SVGSVGElement>): void => {
    const box = e.currentTarget.getBoundingClientRect();
    const px = e.clientX - box.left - PAD.left;
    if (px < 0 || px > inner.width) return setHover(null);
    setHover(x0 + (px / inner.width) * (x1 - x0));
  };
  const hasData = series.some((s) => s.points.some((p) => p.y !== null));
  // Drawn once the width is known, so the first paint is already the right size.
  const plot =
    width > 0 ? (
      <svg width={width} height={height} role="img" aria-label={title} onMouseMove={onMove} onMouseLeave={() => setHover(null)}>
        <g transform={`translate(${PAD.left},${PAD.top})`}>
          {ticks.map((t) => (
            <g key={t}>
              <line className="grid" x1={0} x2={inner.width} y1={scaleY(frame, t)} y2={scaleY(frame, t)} />
              <text className="axis" x={-6} y={scaleY(frame, t)} textAnchor="end" dominantBaseline="middle">
                {format(t)}
              </text>
            </g>
          ))}
          <text className="axis" x={0} y={inner.height + 16} textAnchor="start">
            {formatClock(x0)}
          </text>
          <text className="axis" x={inner.width} y={inner.height + 16} textAnchor="end">
            {formatClock(x1)}
          </text>
          {series.map((s) => {
            // The newest point gets a dot: with one sample, or after a gap, there is no line to see yet.
            const last = [...s.points].reverse().find((p) => p.y !== null);
            return (
              <g key={s.label}>
                <path d={linePath(s.points, frame)} fill="none" stroke={s.color} strokeWidth={1.8} strokeLinejoin="round" />
                {last && last.y !== null && <circle cx={scaleX(frame, last.x)} cy={scaleY(frame, last.y)} r={2.5} fill={s.color} />}
              </g>
            );
          })}
          {hover !== null && <line className="cursor" x1={scaleX(frame, hover)} x2={scaleX(frame, hover)} y1={0} y2={inner.height} />}
          {!hasData && (
            <text className="axis" x={inner.width / 2} y={inner.height / 2} textAnchor="middle">
              no samples yet
            </text>
          )}
        </g>
      </svg>
    ) : null;
  return (
    <figure className="chart" data-chart={title}>
      <figcaption>{title}</figcaption>
      <div ref={ref} className="chart-area" style={{ height }}>
        {plot}
      </div>
      <div className="legend">
        {series.map((s) => {
          const point = hover !== null ? nearest(s, hover) : null;
          const value = point ? point.y : latest(s);
          return (
            <span key={s.label}>
              <i style={{ background: s.color }} />
              {s.label}: <b>{value === null ? '–' : format(value)}</b>
            </span>
          );
        })}
        {hover !== null && <span className="muted">at {formatClock(hover)}</span>}
      </div>
    </figure>
  );
}
