// Deterministic SentencePiece-style vocabulary for generated "llama"-tokenizer models. llama.cpp's SPM
// tokenizer starts from single characters and repeatedly merges the adjacent pair whose concatenation
// is a vocab piece, so a multi-character piece is only reachable if the pieces along some merge path
// exist. Every piece here is added together with all of its prefixes, which guarantees such a path.

/** llama_token_type values stored in tokenizer.ggml.token_type. */
export const TokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  /** Tags such as `<think>`: matched whole by llama.cpp's tokenizer and, unlike CONTROL, kept as text when detokenizing. */
  USER_DEFINED: 4,
  BYTE: 6,
} as const;
export type TokenType = (typeof TokenType)[keyof typeof TokenType];

export const SpecialToken = {
  UNK: 0,
  BOS: 1,
  EOS: 2,
  IM_START: 3,
  IM_END: 4,
} as const;

const SPECIAL_PIECES = [
  ['<unk>', TokenType.UNKNOWN],
  ['<s>', TokenType.CONTROL],
  ['</s>', TokenType.CONTROL],
  ['<|im_start|>', TokenType.CONTROL],
  ['<|im_end|>', TokenType.CONTROL],
] as const;

/** Id of the byte token `<0x00>`; byte b is BYTE_TOKEN_BASE + b. */
export const BYTE_TOKEN_BASE = SPECIAL_PIECES.length;
/** Id of the first NORMAL token. */
export const FIRST_NORMAL_TOKEN = BYTE_TOKEN_BASE + 256;

/** SentencePiece's word-boundary marker; llama.cpp turns spaces into it before tokenizing. */
export const SPACE_MARKER = '\u2581';

export interface Vocab {
  tokens: string[];
  scores: number[];
  types: TokenType[];
}

export class VocabError extends Error {
  readonly code = 'VOCAB_INVALID';
  override name = 'VocabError';
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

// Most common first, so small vocabularies get the most useful words.
const WORDS = (
  'the of and to in is it you that he was for on are with as his they be at one have this from or had ' +
  'by word but what some we can out other were all there when up use your how said an each she which do ' +
  'their time if will way about many then them write would like so these her long make thing see him two ' +
  'has look more day could go come did number sound no most people my over know water than call first who ' +
  'may down side been now find any new work part take get place made live where after back little only ' +
  'round man year came show every good me give our under name very through just form sentence great think ' +
  'say help low line differ turn cause much mean before move right boy old too same tell does set three ' +
  'want air well also play small end put home read hand port large spell add even land here must big high ' +
  'such follow act why ask men change went light kind off need house picture try us again animal point ' +
  'mother world near build self earth father head stand own page should country found answer school grow ' +
  'study still learn plant cover food sun four between state keep eye never last let thought city tree ' +
  'cross farm hard start might story saw far sea draw left late run while press close night real life few ' +
  'north open seem together next white children begin got walk example ease paper group always music those ' +
  'both mark often letter until mile river car feet care second book carry took science eat room friend ' +
  'began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl ' +
  'usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song ' +
  'measure door product black short numeral class wind question happen complete ship area half rock order ' +
  'fire south problem piece told knew pass since top whole king space heard best hour better true during ' +
  'hundred five remember step early hold west ground interest reach fast verb sing listen six table travel ' +
  'less morning ten simple several vowel toward war lay against pattern slow center love person money serve ' +
  'appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry ' +
  'dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood ' +
  'contain front teach week final gave green quick develop ocean warm free minute strong special mind behind ' +
  'clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide ' +
  'surface deep moon island foot system busy test record boat common gold possible plane instead dry wonder ' +
  'laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill ' +
  'east paint language among hello model cluster token request reply'
).split(' ');

const CONSONANTS = 'bcdfghjklmnprstvwyz';
const VOWELS = 'aeiou';

/** Normal pieces every vocab has: printable ASCII, the space marker, and the marker before each letter. */
function basePieces(): string[] {
  const pieces: string[] = [];
  // 0x20 (space) is left out: SPM tokenization never produces it, the space marker stands in for it.
  for (let code = 0x21; code <= 0x7e; code++) pieces.push(String.fromCharCode(code));
  pieces.push(SPACE_MARKER);
  for (const letter of LETTERS) pieces.push(SPACE_MARKER + letter);
  return pieces;
}

export const MIN_VOCAB_SIZE = FIRST_NORMAL_TOKEN + basePieces().length;

/** Unbounded, deterministic stream of pronounceable filler pieces: 1, 2, 3, ... syllables long. */
function* syntheticPieces(): Generator<string> {
  const syllables: string[] = [];
  for (const c of CONSONANTS) for (const v of VOWELS) syllables.push(c + v);
  for (let count = 1; ; count++) {
    const total = syllables.length ** count;
    for (let n = 0; n < total; n++) {
      let piece = '';
      for (let rest = n, i = 0; i < count; i++, rest = Math.floor(rest / syllables.length)) {
        piece = (syllables[rest % syllables.length] as string) + piece;
      }
      yield SPACE_MARKER + piece;
      yield piece;
    }
  }
}

/** Longer pieces score higher, so the tokenizer prefers merging toward whole words. */
function pieceScore(piece: string): number {
  return -10 / [...piece].length;
}

/** Ids of whole dictionary words, with (`▁the`) and without (`the`) the space marker; fragments excluded. */
export function wordIds(vocab: Vocab): { spaced: Set<number>; bare: Set<number> } {
  const spacedWords = new Set(WORDS.map((word) => SPACE_MARKER + word));
  const bareWords = new Set(WORDS);
  const ids = { spaced: new Set<number>(), bare: new Set<number>() };
  vocab.tokens.forEach((piece, id) => {
    if (spacedWords.has(piece)) ids.spaced.add(id);
    else if (bareWords.has(piece)) ids.bare.add(id);
  });
  return ids;
}

/**
 * Builds a vocab of exactly `size` tokens; the same arguments always give the same vocab.
 * `userDefined` tags take the last ids, in the order given, so a vocab without them is unchanged.
 */
export function buildVocab(size: number, userDefined: readonly string[] = []): Vocab {
  if (!Number.isSafeInteger(size) || size < MIN_VOCAB_SIZE + userDefined.length) {
    throw new VocabError(`vocab size must be an integer >= ${MIN_VOCAB_SIZE + userDefined.length}, got ${size}`);
  }
  const normalLimit = size - userDefined.length;
  const vocab: Vocab = { tokens: [], scores: [], types: [] };
  const seen = new Set<string>();
  const push = (piece: string, type: TokenType, score: number): void => {
    if (seen.has(piece)) throw new VocabError(`duplicate vocab piece ${JSON.stringify(piece)}`);
    seen.add(piece);
    vocab.tokens.push(piece);
    vocab.types.push(type);
    vocab.scores.push(score);
  };
  for (const [piece, type] of SPECIAL_PIECES) push(piece, type, 0);
  for (let byte = 0; byte < 256; byte++) {
    push(`<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`, TokenType.BYTE, 0);
  }
  for (const piece of basePieces()) push(piece, TokenType.NORMAL, pieceScore(piece));

  // Adds the piece's missing prefixes shortest first, so the merge-path invariant holds even when the
  // vocab fills up halfway through a word.
  const addWithPrefixes = (piece: string): void => {
    const chars = [...piece];
    for (let length = 2; length <= chars.length && vocab.tokens.length < normalLimit; length++) {
      const prefix = chars.slice(0, length).join('');
      if (!seen.has(prefix)) push(prefix, TokenType.NORMAL, pieceScore(prefix));
    }
  };
  // Both forms of each word, so even small vocabs can start a line (no space) with a whole word.
  const candidates = function* (): Generator<string> {
    for (const word of WORDS) {
      yield SPACE_MARKER + word;
      yield word;
    }
    yield* syntheticPieces();
  };
  for (const piece of candidates()) {
    if (vocab.tokens.length >= normalLimit) break;
    addWithPrefixes(piece);
  }
  for (const piece of userDefined) {
    if (piece === '') throw new VocabError('a user-defined token cannot be empty');
    push(piece, TokenType.USER_DEFINED, 0);
  }
  return vocab;
}
