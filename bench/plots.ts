// Plots for REPORT.md: Vega-Lite specs built from a benchmark result (pure), rendered to SVG by Vega
// without a browser and rasterized to PNG by resvg.

import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

const SERVER_LABELS = { shoal: "Shoal's API", llamaServer: 'llama-server, launched by hand' } as const;
type ServerKey = keyof typeof SERVER_LABELS;

export interface ThroughputPoint {
  clients: number;
  server: string;
  /** Median aggregate tokens/s over the repetitions, with their min and max. */
  tokPerS: number;
  min: number;
  max: number;
}

export interface TtftPoint {
  clients: number;
  server: string;
  percentile: 'p50' | 'p95';
  ms: number;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The points of bench/concurrency.ts's result; levels or servers with missing figures are left out. */
export function concurrencyPoints(result: unknown): { throughput: ThroughputPoint[]; ttft: TtftPoint[] } {
  const throughput: ThroughputPoint[] = [];
  const ttft: TtftPoint[] = [];
  const levels = isRecord(result) && Array.isArray(result.results) ? result.results : [];
  for (const level of levels) {
    if (!isRecord(level)) continue;
    const clients = num(level.clients);
    if (clients === null) continue;
    for (const key of Object.keys(SERVER_LABELS) as ServerKey[]) {
      const side = level[key];
      if (!isRecord(side)) continue;
      const agg = side.aggregateTokPerS;
      if (isRecord(agg)) {
        const median = num(agg.median);
        if (median !== null) throughput.push({ clients, server: SERVER_LABELS[key], tokPerS: median, min: num(agg.min) ?? median, max: num(agg.max) ?? median });
      }
      const t = side.ttftMs;
      if (isRecord(t)) {
        for (const percentile of ['p50', 'p95'] as const) {
          const ms = num(t[percentile]);
          if (ms !== null) ttft.push({ clients, server: SERVER_LABELS[key], percentile, ms });
        }
      }
    }
  }
  return { throughput, ttft };
}

function clientsAxis(levels: number[]): Record<string, unknown> {
  return {
    field: 'clients',
    type: 'quantitative',
    scale: { type: 'log', base: 2, nice: false, domain: [Math.min(...levels), Math.max(...levels)] },
    axis: { title: 'Concurrent clients', values: levels, format: 'd', grid: true },
  };
}

const COLOR = {
  field: 'server',
  type: 'nominal',
  title: 'Server',
  scale: { domain: [SERVER_LABELS.shoal, SERVER_LABELS.llamaServer], range: ['#1f77b4', '#ff7f0e'] },
  legend: { orient: 'bottom', direction: 'horizontal', labelLimit: 400, symbolType: 'stroke', symbolStrokeWidth: 3, symbolSize: 300, symbolOpacity: 1 },
};

const CONFIG = { font: 'DejaVu Sans', title: { fontSize: 16, subtitleFontSize: 12, anchor: 'start' }, axis: { labelFontSize: 12, titleFontSize: 13 }, legend: { labelFontSize: 12, titleFontSize: 12 } };

export function throughputSpec(points: ThroughputPoint[], subtitle: string): TopLevelSpec {
  const levels = [...new Set(points.map((p) => p.clients))].sort((a, b) => a - b);
  const x = clientsAxis(levels.length ? levels : [1]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Aggregate decode throughput vs concurrent clients', subtitle: `${subtitle}; line: median, bar: min–max over the bursts` },
    width: 560,
    height: 340,
    background: 'white',
    config: CONFIG,
    data: { values: points },
    layer: [
      { mark: { type: 'rule', strokeWidth: 2, opacity: 0.5 }, encoding: { x, y: { field: 'min', type: 'quantitative' }, y2: { field: 'max' }, color: COLOR } },
      {
        mark: { type: 'line', point: { size: 60, filled: true }, strokeWidth: 2.5 },
        encoding: {
          x,
          y: { field: 'tokPerS', type: 'quantitative', title: 'Aggregate decode throughput (tokens/s)', scale: { zero: true } },
          color: COLOR,
        },
      },
    ],
  } as TopLevelSpec;
}

export function ttftSpec(points: TtftPoint[], subtitle: string): TopLevelSpec {
  const levels = [...new Set(points.map((p) => p.clients))].sort((a, b) => a - b);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Time to first token vs concurrent clients', subtitle: `${subtitle}; p50 solid, p95 dashed` },
    width: 560,
    height: 340,
    background: 'white',
    config: CONFIG,
    data: { values: points },
    mark: { type: 'line', point: { size: 60, filled: true }, strokeWidth: 2.5 },
    encoding: {
      x: clientsAxis(levels.length ? levels : [1]),
      y: { field: 'ms', type: 'quantitative', title: 'Time to first token (ms)', scale: { zero: true } },
      color: COLOR,
      strokeDash: {
        field: 'percentile',
        type: 'nominal',
        title: 'Percentile',
        scale: { domain: ['p50', 'p95'], range: [[1, 0], [6, 4]] },
        // The subtitle says which is which: a legend of dash patterns reads worse than those four words.
        legend: null,
      },
      detail: { field: 'percentile' },
    },
  } as TopLevelSpec;
}

/** A Vega-Lite spec as a PNG, at twice its CSS size so it stays sharp on dense screens. */
export async function renderPng(spec: TopLevelSpec): Promise<Buffer> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  const png = new Resvg(svg, { fitTo: { mode: 'zoom', value: 2 }, background: 'white', font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } }).render().asPng();
  return Buffer.from(png);
}
