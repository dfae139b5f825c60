// A small markdown reader for chat answers: paragraphs, headings, emphasis, inline code, fenced code
// blocks, lists, quotes, rules and links. It returns a tree of plain data, never HTML: the page turns
// the tree into React elements, so every character of model output ends up as escaped text and no
// markup a model writes can run. Images are shown as links (fetching them would reach other hosts), and
// only http(s), mailto and same-page links become links at all.

export type Inline =
  | { type: 'text'; text: string }
  | { type: 'code'; text: string }
  | { type: 'strong'; children: Inline[] }
  | { type: 'em'; children: Inline[] }
  | { type: 'link'; href: string; children: Inline[] }
  | { type: 'break' };

export type Block =
  | { type: 'paragraph'; children: Inline[] }
  | { type: 'heading'; level: number; children: Inline[] }
  /** `closed` is false while a streamed answer is still inside the fence. */
  | { type: 'code'; lang: string; text: string; closed: boolean }
  | { type: 'list'; ordered: boolean; start: number; items: Block[][] }
  | { type: 'quote'; children: Block[] }
  | { type: 'rule' };

/** Deeper nesting (lists in quotes in lists...) is read as plain text: bounded work on hostile input. */
export const MAX_MARKDOWN_DEPTH = 8;

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const LIST_ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(\s+|$)(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;

export function parseMarkdown(text: string): Block[] {
  return parseBlocks(text.replace(/\r\n?/g, '\n').split('\n'), 0);
}

function parseBlocks(lines: string[], depth: number): Block[] {
  const blocks: Block[] = [];
  let paragraph: string[] = [];
  const endParagraph = (): void => {
    if (paragraph.length > 0) blocks.push({ type: 'paragraph', children: parseInline(paragraph.join('\n'), depth) });
    paragraph = [];
  };

  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === '') {
      endParagraph();
      i += 1;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      endParagraph();
      const marker = fence[1]!;
      const body: string[] = [];
      let closed = false;
      i += 1;
      while (i < lines.length) {
        const candidate = lines[i]!.trim();
        if (candidate.startsWith(marker[0]!.repeat(marker.length)) && /^(`+|~+)$/.test(candidate)) {
          closed = true;
          i += 1;
          break;
        }
        body.push(lines[i]!);
        i += 1;
      }
      blocks.push({ type: 'code', lang: fence[2] ?? '', text: body.join('\n'), closed });
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      endParagraph();
      blocks.push({ type: 'heading', level: heading[1]!.length, children: parseInline((heading[2] ?? '').replace(/\s+#+$/, ''), depth) });
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      endParagraph();
      blocks.push({ type: 'rule' });
      i += 1;
      continue;
    }
    if (depth < MAX_MARKDOWN_DEPTH && QUOTE.test(line)) {
      endParagraph();
      const body: string[] = [];
      while (i < lines.length && lines[i]!.trim() !== '') {
        const quoted = QUOTE.exec(lines[i]!);
        body.push(quoted ? quoted[1]! : lines[i]!);
        i += 1;
      }
      blocks.push({ type: 'quote', children: parseBlocks(body, depth + 1) });
      continue;
    }
    const item = depth < MAX_MARKDOWN_DEPTH ? LIST_ITEM.exec(line) : null;
    // A list interrupts a paragraph only when it starts with "-", "*", "+" or "1.": "in 2024. we..." stays text.
    if (item && item[4] !== '' && (paragraph.length === 0 || !/^\d/.test(item[2]!) || /^1[.)]$/.test(item[2]!))) {
      endParagraph();
      i = parseList(lines, i, depth, blocks);
      continue;
    }
    paragraph.push(line);
    i += 1;
  }
  endParagraph();
  return blocks;
}

/** Reads one list starting at `start`; returns the index of the first line after it. */
function parseList(lines: string[], start: number, depth: number, blocks: Block[]): number {
  const first = LIST_ITEM.exec(lines[start]!)!;
  const ordered = /^\d/.test(first[2]!);
  const kind = ordered ? first[2]!.slice(-1) : first[2]!;
  const items: Block[][] = [];
  let i = start;
  while (i < lines.length) {
    const match = LIST_ITEM.exec(lines[i]!);
    if (!match || (ordered ? !/^\d/.test(match[2]!) || match[2]!.slice(-1) !== kind : match[2] !== kind)) break;
    // Content lines of this item: its first line, then lines indented past the marker (or lazy
    // continuation lines), up to a blank line followed by something not indented.
    const indent = match[1]!.length + match[2]!.length + Math.min(match[3]!.length, 4);
    const body: string[] = [match[4]!];
    i += 1;
    while (i < lines.length) {
      const line = lines[i]!;
      if (line.trim() === '') {
        const next = lines[i + 1];
        if (next !== undefined && leadingSpaces(next) >= Math.min(indent, 2) && next.trim() !== '') {
          body.push('');
          i += 1;
          continue;
        }
        break;
      }
      const spaces = leadingSpaces(line);
      if (spaces >= 2) {
        body.push(line.slice(Math.min(spaces, indent)));
        i += 1;
        continue;
      }
      if (LIST_ITEM.test(line) || FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) break;
      body.push(line);
      i += 1;
    }
    items.push(parseBlocks(body, depth + 1));
    // A blank line between items keeps the list going.
    if (i < lines.length && lines[i]!.trim() === '' && i + 1 < lines.length && LIST_ITEM.test(lines[i + 1]!)) i += 1;
  }
  blocks.push({ type: 'list', ordered, start: ordered ? Number.parseInt(first[2]!, 10) : 1, items });
  return i;
}

function leadingSpaces(line: string): number {
  let n = 0;
  while (n < line.length && (line[n] === ' ' || line[n] === '\t')) n += line[n] === '\t' ? 4 : 1;
  return n;
}

/** Returns `href` when it may be a link on the page, else null. */
export function safeHref(href: string): string | null {
  const trimmed = href.trim();
  if (/^(https?:|mailto:)/i.test(trimmed)) return trimmed;
  if (trimmed.startsWith('#')) return trimmed;
  return null;
}

const PUNCTUATION = /[!-/:-@[-`{-~]/;
const BARE_URL = /^https?:\/\/[^\s<>()[\]"'`]+/i;

export function parseInline(text: string, depth = 0): Inline[] {
  const out: Inline[] = [];
  let plain = '';
  const flush = (): void => {
    if (plain !== '') out.push({ type: 'text', text: plain });
    plain = '';
  };
  const nested = depth < MAX_MARKDOWN_DEPTH;

  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length && PUNCTUATION.test(text[i + 1]!)) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '\n') {
      flush();
      out.push({ type: 'break' });
      i += 1;
      continue;
    }
    if (c === '`') {
      let run = 1;
      while (text[i + run] === '`') run += 1;
      const close = findBacktickRun(text, i + run, run);
      if (close !== -1) {
        flush();
        let code = text.slice(i + run, close).replace(/\n/g, ' ');
        if (code.length > 2 && code.startsWith(' ') && code.endsWith(' ') && code.trim() !== '') code = code.slice(1, -1);
        out.push({ type: 'code', text: code });
        i = close + run;
        continue;
      }
      plain += '`'.repeat(run);
      i += run;
      continue;
    }
    if (nested && (c === '*' || c === '_')) {
      const span = emphasis(text, i, c);
      if (span) {
        flush();
        const children = parseInline(text.slice(span.contentStart, span.contentEnd), depth + 1);
        out.push(span.strong ? { type: 'strong', children } : { type: 'em', children });
        i = span.end;
        continue;
      }
    }
    if (c === '[' || (c === '!' && text[i + 1] === '[')) {
      const link = nested ? linkAt(text, c === '!' ? i + 1 : i) : null;
      if (link) {
        flush();
        const children = parseInline(link.label === '' ? link.href : link.label, depth + 1);
        const href = safeHref(link.href);
        if (href) out.push({ type: 'link', href, children });
        else out.push(...children);
        i = link.end;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && (i === 0 || !/[\w/]/.test(text[i - 1]!))) {
      const bare = BARE_URL.exec(text.slice(i, i + 2048));
      if (bare) {
        let url = bare[0];
        while (/[.,;:!?]$/.test(url)) url = url.slice(0, -1);
        flush();
        out.push({ type: 'link', href: url, children: [{ type: 'text', text: url }] });
        i += url.length;
        continue;
      }
    }
    plain += c;
    i += 1;
  }
  flush();
  return out;
}

function findBacktickRun(text: string, from: number, run: number): number {
  let i = text.indexOf('`', from);
  while (i !== -1) {
    let n = 1;
    while (text[i + n] === '`') n += 1;
    if (n === run) return i;
    i = text.indexOf('`', i + n);
  }
  return -1;
}

/** `**strong**`, `__strong__`, `*em*` or `_em_` starting at `start`, with a non-space just inside each delimiter. */
function emphasis(text: string, start: number, marker: string): { strong: boolean; contentStart: number; contentEnd: number; end: number } | null {
  // "snake_case_names" are not emphasis: an underscore must not sit inside a word.
  if (marker === '_' && start > 0 && /\w/.test(text[start - 1]!)) return null;
  const strong = text[start + 1] === marker;
  const width = strong ? 2 : 1;
  const contentStart = start + width;
  if (contentStart >= text.length || /\s/.test(text[contentStart]!)) return null;
  const delimiter = marker.repeat(width);
  let search = contentStart + 1;
  while (search <= text.length) {
    let close = text.indexOf(delimiter, search);
    if (close === -1) return null;
    // "***" closing a strong span that holds an em: the strong delimiter is the run's last two.
    while (strong && text[close + width] === marker) close += 1;
    const before = text[close - 1]!;
    const after = text[close + width];
    const doubled = !strong && after === marker;
    const wordAfter = marker === '_' && after !== undefined && /\w/.test(after);
    if (!/\s/.test(before) && !doubled && !wordAfter && text.slice(contentStart, close).indexOf('\n\n') === -1) {
      return { strong, contentStart, contentEnd: close, end: close + width };
    }
    search = close + (doubled ? 2 : 1);
  }
  return null;
}

/** `[label](href)` starting at `start` (a '['). */
function linkAt(text: string, start: number): { label: string; href: string; end: number } | null {
  let depth = 0;
  let i = start;
  for (; i < text.length; i += 1) {
    const c = text[i];
    if (c === '\\') {
      i += 1;
      continue;
    }
    if (c === '[') depth += 1;
    else if (c === ']') {
      depth -= 1;
      if (depth === 0) break;
    } else if (c === '\n' && text[i + 1] === '\n') return null;
  }
  if (i >= text.length || text[i + 1] !== '(') return null;
  const close = text.indexOf(')', i + 2);
  if (close === -1) return null;
  const target = text.slice(i + 2, close).trim();
  if (/\s/.test(target.replace(/\s+"[^"]*"$/, ''))) return null;
  return { label: text.slice(start + 1, i), href: target.replace(/\s+"[^"]*"$/, '').replace(/^<(.*)>$/, '$1'), end: close + 1 };
}
