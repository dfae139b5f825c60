/**
 * Which eSpeak NG voice speaks for a requested voice name, and at what rate. Pure: the catalog (the
 * voices and variants eSpeak NG ships) is read from the engine once and passed in.
 */

/**
 * OpenAI's voice names as eSpeak NG voices: a language voice plus a variant (a pitch, formant and
 * breathiness profile, `+m3`, `+f2`). They are chosen to be told apart: lower male variants for the
 * voices OpenAI describes as deep, female variants for the bright ones, the British RP voice for
 * `fable`. docs/API.md shows the table.
 */
export const OPENAI_VOICES: Readonly<Record<string, string>> = {
  alloy: 'en-us',
  ash: 'en-us+m4',
  ballad: 'en-gb-scotland+m5',
  coral: 'en-us+f2',
  echo: 'en-us+m3',
  fable: 'en-gb-x-rp',
  nova: 'en-us+f3',
  onyx: 'en-us+m7',
  sage: 'en-gb+f1',
  shimmer: 'en-us+f4',
  verse: 'en-us+m6',
  marin: 'en-us+f5',
  cedar: 'en-us+m2',
};

/**
 * What eSpeak NG ships: each voice's identifier (`gmw/en-US`, which is what it loads a voice by) and
 * the languages it speaks (`en-us`, `en`), each with eSpeak NG's priority (lower is preferred), and
 * the variant names.
 */
export interface VoiceCatalog {
  voices: readonly { identifier: string; languages: readonly { name: string; priority: number }[] }[];
  variants: readonly string[];
}

/** eSpeak NG's own rate at speed 1, in words per minute (its default). */
export const NORMAL_WORDS_PER_MINUTE = 175;
/** eSpeak NG clamps rates to this range (this build has no sonic speed-up), in words per minute. */
export const MIN_WORDS_PER_MINUTE = 80;
export const MAX_WORDS_PER_MINUTE = 450;

/**
 * The eSpeak NG voice to load (`identifier` or `identifier+variant`) for a requested voice, or null
 * when neither OpenAI's names nor eSpeak NG's voices know it. A language picks the voice eSpeak NG
 * prefers for it. eSpeak NG itself ignores an unknown variant silently, so variants are checked
 * here. Case does not matter.
 */
export function resolveVoice(requested: string, catalog: VoiceCatalog): string | null {
  // Own keys only: a voice named `constructor` or `__proto__` is unknown, not Object's.
  const lower = requested.toLowerCase();
  const name = Object.hasOwn(OPENAI_VOICES, lower) ? OPENAI_VOICES[lower]! : requested;
  const [voicePart = '', variant, ...rest] = name.split('+');
  if (rest.length > 0) return null;
  const identifier = identifierOf(voicePart.toLowerCase(), catalog);
  if (identifier === null) return null;
  if (variant === undefined) return identifier;
  const known = catalog.variants.find((v) => v.toLowerCase() === variant.toLowerCase());
  return known === undefined ? null : `${identifier}+${known}`;
}

/** The voice a (lower-cased) identifier or language name names. */
function identifierOf(name: string, catalog: VoiceCatalog): string | null {
  const exact = catalog.voices.find((v) => v.identifier.toLowerCase() === name);
  if (exact) return exact.identifier;
  let best: { identifier: string; priority: number } | null = null;
  for (const voice of catalog.voices) {
    for (const language of voice.languages) {
      if (language.name.toLowerCase() === name && (best === null || language.priority < best.priority)) best = { identifier: voice.identifier, priority: language.priority };
    }
  }
  return best?.identifier ?? null;
}

/** OpenAI's speed (1 = normal) as an eSpeak NG rate, clamped to what eSpeak NG can speak. */
export function wordsPerMinute(speed: number): number {
  return Math.min(MAX_WORDS_PER_MINUTE, Math.max(MIN_WORDS_PER_MINUTE, Math.round(NORMAL_WORDS_PER_MINUTE * speed)));
}
