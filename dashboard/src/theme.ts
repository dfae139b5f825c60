// Light and dark themes: the system's preference until the toggle is used, then the choice kept in
// this browser.

export type Theme = 'light' | 'dark';
const KEY = 'shoal.theme';

export function savedTheme(): Theme | null {
  try {
    const value = localStorage.getItem(KEY);
    return value === 'light' || value === 'dark' ? value : null;
  } catch {
    return null;
  }
}

export function systemTheme(): Theme {
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

export function applyTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme;
}

export function saveTheme(theme: Theme): void {
  try {
    localStorage.setItem(KEY, theme);
  } catch {
    // Not kept: the toggle still works for this page.
  }
  applyTheme(theme);
}
