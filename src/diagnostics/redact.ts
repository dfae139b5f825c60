// Takes secrets out of the text of a capture bundle (bundle.ts) before it leaves the node. Pure.
//
// Two nets. First the secrets the node knows by value (its admin token, its API keys, the join codes
// and invitation secrets it issued), wherever they appear, also JSON-escaped. Then patterns for what
// a secret looks like in context, for the ones the node does not know or no longer holds: a Bearer
// credential, a join code, a `--api-key x` style option of a command line, a `X_TOKEN=y` variable and
// a JSON field named like a secret. API key digests stay: they are what settings keep, not the keys.

export const REDACTED = '[redacted]';
/**
 * Known values shorter than this are redacted only where a pattern finds them: replacing every
 * occurrence of a two-letter key everywhere would shred the bundle and reveal the key by its gaps.
 */
export const SECRET_MIN_CHARS = 6;

const PATTERNS: { pattern: RegExp; replace: string }[] = [
  // `Authorization: Bearer x`, `bearer x`.
  { pattern: /\b(Bearer)(\s+)[^\s"',;]+/gi, replace: `$1$2${REDACTED}` },
  // Join codes (src/membership/join-code.ts: `shoal1-` + base64url).
  { pattern: /\bshoal1-[A-Za-z0-9_-]{8,}/g, replace: `shoal1-${REDACTED}` },
  // Options of a command line: `--api-key x`, `--api-key=x`, `--admin-token x`, `--password=x`.
  { pattern: /(--[A-Za-z0-9-]*(?:keys?|token|secrets?|password))(=|\s+)(?!--)[^\s"']+/gi, replace: `$1$2${REDACTED}` },
  // Environment variables: `SHOAL_API_KEY=x`, `HF_TOKEN=x`.
  { pattern: /\b([A-Z0-9_]*(?:KEYS?|TOKEN|SECRETS?|PASSWORD))=[^\s"']+/g, replace: `$1=${REDACTED}` },
  // JSON fields named like a secret, a string or a list of them: `"secret": "x"`, `"adminToken":"x"`,
  // `"apiKeys": ["x"]`, `"x-api-key": "x"`.
  { pattern: /("[A-Za-z0-9_-]*(?:secret|token|password|api[_-]?key|authorization)s?"\s*:\s*)(?:"(?:[^"\\]|\\.)*"|\[[^\]]*\])/gi, replace: `$1"${REDACTED}"` },
  // Headers and key-value text: `x-api-key: x`, `Authorization: Basic x`, `token=x`, `HF_TOKEN: x`.
  { pattern: /\b([A-Za-z0-9_-]*(?:x-api-key|authorization|token|secret|password))(\s*[:=]\s*)(?!(?:(?:Basic|Bearer)\s+)?\[redacted\])((?:Basic|Bearer)\s+)?[^\s"',;]+/gi, replace: `$1$2$3${REDACTED}` },
  // Hugging Face access tokens, wherever they appear.
  { pattern: /\bhf_[A-Za-z0-9]{16,}/g, replace: REDACTED },
];

/** A function that redacts `secrets` (known values; empty and duplicate ones are ignored) and the patterns above. */
export function redactor(secrets: Iterable<string>): (text: string) => string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret.length < SECRET_MIN_CHARS) continue;
    forms.add(secret);
    // As it appears inside a JSON string (a key with a quote or a backslash in it).
    forms.add(JSON.stringify(secret).slice(1, -1));
  }
  // Longest first: a secret that contains another is replaced whole.
  const values = [...forms].sort((a, b) => b.length - a.length);
  return (text: string): string => {
    let out = text;
    for (const value of values) if (out.includes(value)) out = out.split(value).join(REDACTED);
    for (const { pattern, replace } of PATTERNS) out = out.replace(pattern, replace);
    return out;
  };
}
