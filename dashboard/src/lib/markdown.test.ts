import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_MARKDOWN_DEPTH, parseInline, parseMarkdown, safeHref, type Block, type Inline } from './markdown.js';

const text = (t: string): Inline => ({ type: 'text', text: t });

test('paragraphs, headings, rules and line breaks', () => {
  assert.deepEqual(parseMarkdown('# Title\n\nfirst line\nsecond line\n\n---\nlast'), [
    { type: 'heading', level: 1, children: [text('Title')] },
    { type: 'paragraph', children: [text('first line'), { type: 'break' }, text('second line')] },
    { type: 'rule' },
    { type: 'paragraph', children: [text('last')] },
  ]);
});

test('bold, italic, inline code and escapes', () => {
  assert.deepEqual(parseInline('a **b** and *c* and `d*e*` \\*f\\*'), [
    text('a '),
    { type: 'strong', children: [text('b')] },
    text(' and '),
    { type: 'em', children: [text('c')] },
    text(' and '),
    { type: 'code', text: 'd*e*' },
    text(' *f*'),
  ]);
  assert.deepEqual(parseInline('__x__ _y_ snake_case_name 2 * 3 * 4'), [
    { type: 'strong', children: [text('x')] },
    text(' '),
    { type: 'em', children: [text('y')] },
    text(' snake_case_name 2 * 3 * 4'),
  ]);
  assert.deepEqual(parseInline('**bold *and italic***'), [{ type: 'strong', children: [text('bold '), { type: 'em', children: [text('and italic')] }] }]);
  assert.deepEqual(parseInline('``a ` b``'), [{ type: 'code', text: 'a ` b' }]);
  assert.deepEqual(parseInline('unclosed `tick and **star'), [text('unclosed `tick and **star')]);
});

test('fenced code keeps its text verbatim, also while a streamed answer is still inside it', () => {
  const blocks = parseMarkdown('Run:\n```ts\nconst a = 1 < 2 && "<b>";\n  indented **not bold**\n```\ndone');
  assert.deepEqual(blocks, [
    { type: 'paragraph', children: [text('Run:')] },
    { type: 'code', lang: 'ts', text: 'const a = 1 < 2 && "<b>";\n  indented **not bold**', closed: true },
    { type: 'paragraph', children: [text('done')] },
  ]);
  assert.deepEqual(parseMarkdown('```py\nprint(1)'), [{ type: 'code', lang: 'py', text: 'print(1)', closed: false }]);
  assert.deepEqual(parseMarkdown('~~~~\n```\n~~~~'), [{ type: 'code', lang: '', text: '```', closed: true }]);
});

test('lists: bullets, numbers with their start, nesting and item paragraphs', () => {
  const blocks = parseMarkdown('- one\n- two **b**\n  - nested\n- three\n\n3. c\n4. d\n');
  const expected: Block[] = [
    {
      type: 'list',
      ordered: false,
      start: 1,
      items: [
        [{ type: 'paragraph', children: [text('one')] }],
        [
          { type: 'paragraph', children: [text('two '), { type: 'strong', children: [text('b')] }] },
          { type: 'list', ordered: false, start: 1, items: [[{ type: 'paragraph', children: [text('nested')] }]] },
        ],
        [{ type: 'paragraph', children: [text('three')] }],
      ],
    },
    { type: 'list', ordered: true, start: 3, items: [[{ type: 'paragraph', children: [text('c')] }], [{ type: 'paragraph', children: [text('d')] }]] },
  ];
  assert.deepEqual(blocks, expected);
  // A number inside a sentence does not start a list.
  assert.equal(parseMarkdown('It was\n2024. Then')[0]!.type, 'paragraph');
});

test('links: only http(s), mailto and same-page targets become links; images become links', () => {
  assert.deepEqual(parseInline('[docs](https://example.com/a) and [bad](javascript:alert(1))'), [
    { type: 'link', href: 'https://example.com/a', children: [text('docs')] },
    text(' and '),
    text('bad'),
    text(')'),
  ]);
  assert.deepEqual(parseInline('![cat](https://example.com/cat.png)'), [{ type: 'link', href: 'https://example.com/cat.png', children: [text('cat')] }]);
  assert.deepEqual(parseInline('see https://example.com/x.'), [text('see '), { type: 'link', href: 'https://example.com/x', children: [text('https://example.com/x')] }, text('.')]);
  assert.equal(safeHref('JAVASCRIPT:alert(1)'), null);
  assert.equal(safeHref('data:text/html,<script>'), null);
  assert.equal(safeHref('#/chat'), '#/chat');
});

test('markup in model output stays text', () => {
  const blocks = parseMarkdown('<script>alert(1)</script> <img src=x onerror=alert(1)>');
  assert.deepEqual(blocks, [{ type: 'paragraph', children: [text('<script>alert(1)</script> <img src=x onerror=alert(1)>')] }]);
});

test('quotes nest; nesting deeper than the limit is read as text', () => {
  assert.deepEqual(parseMarkdown('> quoted *words*\n> more'), [
    { type: 'quote', children: [{ type: 'paragraph', children: [text('quoted '), { type: 'em', children: [text('words')] }, { type: 'break' }, text('more')] }] },
  ]);
  let block: Block | undefined = parseMarkdown('>'.repeat(50) + ' deep')[0];
  let depth = 0;
  while (block?.type === 'quote') {
    block = block.children[0];
    depth += 1;
  }
  assert.equal(depth, MAX_MARKDOWN_DEPTH);
  assert.equal(block?.type, 'paragraph');
});
