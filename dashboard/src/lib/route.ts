// Hash routes: `#/cluster`, `#/models`, `#/chat`, `#/metrics`, `#/logs`, `#/observability`, `#/settings`. A hash keeps every page on the
// one URL the node serves, so a reload or a shared link needs no server-side routing.

export const PAGES = ['cluster', 'models', 'chat', 'metrics', 'logs', 'observability', 'settings'] as const;
export type Page = (typeof PAGES)[number];

export interface Route {
  page: Page;
  /** `#/logs?node=abc` -> { node: 'abc' } */
  params: Record<string, string>;
}

export function parseRoute(hash: string): Route {
  const text = hash.replace(/^#\/?/, '');
  const [path = '', query = ''] = text.split('?', 2);
  const page = (PAGES as readonly string[]).includes(path) ? (path as Page) : 'cluster';
  const params: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(query)) params[key] = value;
  return { page, params };
}

export function routeHash(page: Page, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(params).toString();
  return `#/${page}${query === '' ? '' : `?${query}`}`;
}
