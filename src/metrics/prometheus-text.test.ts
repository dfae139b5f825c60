import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseExposition, parseValue } from './prometheus-text.test-support.js';

/** The strict parser the metrics tests rely on must itself refuse what Prometheus refuses. */

const GOOD = `# HELP req_total Requests, with a \\\\ and a \\n.
# TYPE req_total counter
req_total{code="200",path="/a\\"b\\\\c\\nd"} 3
req_total{code="500"} 0 1700000000000
# TYPE lat histogram
lat_bucket{le="0.1"} 1
lat_bucket{le="1"} 2
lat_bucket{le="+Inf"} 2
lat_sum 0.6
lat_count 2
# TYPE q summary
q{quantile="0.5"} 1
q_sum 3
q_count 2
# a plain comment
temp NaN
big +Inf
small -1.5e-3
`;

test('a valid exposition parses with its escapes, types and values', () => {
  const families = parseExposition(GOOD);
  const req = families.get('req_total')!;
  assert.equal(req.type, 'counter');
  assert.equal(req.help, 'Requests, with a \\ and a \n.');
  assert.deepEqual(req.samples[0]!.labels, { code: '200', path: '/a"b\\c\nd' });
  assert.equal(req.samples[1]!.timestampMs, 1_700_000_000_000);
  assert.equal(families.get('lat')!.samples.length, 5);
  assert.equal(families.get('temp')!.type, 'untyped');
  assert.ok(Number.isNaN(families.get('temp')!.samples[0]!.value));
  assert.equal(families.get('big')!.samples[0]!.value, Number.POSITIVE_INFINITY);
  assert.equal(families.get('small')!.samples[0]!.value, -0.0015);
});

test('values follow Go float syntax, case-insensitive specials', () => {
  for (const [text, expected] of [['1', 1], ['-0.5', -0.5], ['.5', 0.5], ['1e3', 1000], ['+Inf', Infinity], ['-inf', -Infinity], ['Nan', NaN]] as const) {
    const v = parseValue(text);
    assert.ok(Number.isNaN(expected) ? Number.isNaN(v) : v === expected, text);
  }
  for (const bad of ['', '1,5', '0x10', 'one', '1e', '--1', 'Infinit']) assert.equal(parseValue(bad), null, bad);
});

const BAD: [string, string, RegExp][] = [
  ['no trailing newline', 'a 1', /newline/],
  ['bad metric name', '1a 1\n', /metric name/],
  ['bad label name', 'a{1x="y"} 1\n', /label name/],
  ['reserved label', 'a{__x="y"} 1\n', /reserved/],
  ['duplicate label', 'a{x="1",x="2"} 1\n', /twice/],
  ['bad escape', 'a{x="\\t"} 1\n', /escape/],
  ['unterminated label value', 'a{x="y} 1\n', /unterminated|expected/],
  ['missing value', 'a{x="y"}\n', /value/],
  ['bad value', 'a 1,5\n', /bad value/],
  ['bad timestamp', 'a 1 1.5\n', /timestamp/],
  ['extra field', 'a 1 2 3\n', /value/],
  ['duplicate series', 'a{x="1"} 1\na{x="1"} 2\n', /duplicate/],
  ['interleaved family', 'a 1\nb 1\na{x="2"} 1\n', /together/],
  ['TYPE after samples', 'a 1\n# TYPE a gauge\n', /after its samples/],
  ['second TYPE', '# TYPE a gauge\n# TYPE a gauge\n', /second TYPE/],
  ['second HELP', '# HELP a x\n# HELP a y\n', /second HELP/],
  ['unknown type', '# TYPE a meter\n', /unknown type/],
  ['negative counter', '# TYPE a counter\na -1\n', /negative/],
  ['bucket without le', '# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n', /le/],
  ['decreasing buckets', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="2"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n', /below/],
  ['no +Inf bucket', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_sum 1\nh_count 2\n', /\+Inf/],
  ['count differs from +Inf', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', /differs/],
  ['histogram without _count', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\n', /_count/],
  ['summary without quantile', '# TYPE s summary\ns 1\ns_sum 1\ns_count 1\n', /quantile/],
];

test('every violation is refused, naming what is wrong', () => {
  for (const [what, text, message] of BAD) assert.throws(() => parseExposition(text), message, what);
});
