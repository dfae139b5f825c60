// Model file names on the hub: GGUF quantization labels, split files grouped into one model, whisper.cpp's
// ggml speech-to-text files (`ggml-base.en.bin`), and the default pick among a repo's models. Pure: no I/O.

/** One file of a hub repo at a pinned revision. */
export interface HubFile {
  /** Path inside the repo, `/`-separated (files can sit in folders). */
  path: string;
  size: number;
  /** SHA-256 of the content (the LFS oid); null for a small file committed without LFS. */
  sha256: string | null;
  /** Git blob id (of the LFS pointer for LFS files, of the content otherwise); null when unknown. */
  gitOid: string | null;
}

/** A model as stored in a repo: one GGUF file, or the shards of a split one (`-00001-of-00003.gguf`). */
export interface GgufGroup {
  /** The group's path with any shard suffix removed: `Q4_K_M/Llama-Q4_K_M.gguf`. */
  name: string;
  /** Upper-case quantization label (`Q4_K_M`, `IQ4_XS`, `F16`, `UD-Q4_K_XL`), null when the name has none. */
  quant: string | null;
  /** A tag for the model id (`owner/repo:<tag>`): the quant label when it is unique in the repo, else the file stem. */
  tag: string;
  /** Files in shard order. */
  files: HubFile[];
  /** The file to load (the first shard); llama.cpp finds the others beside it. */
  primaryPath: string;
  totalBytes: number;
  /** False for a split model with shards missing from the repo. */
  complete: boolean;
  /** A multimodal projector (`mmproj-*.gguf`), never a model on its own. */
  projector: boolean;
  /** A whisper.cpp speech-to-text model (`ggml-*.bin`, not a GGUF): always one file. */
  speech: boolean;
}

export interface GgufName {
  path: string;
  /** File name without folder, shard suffix and `.gguf`. */
  stem: string;
  /** Path without the shard suffix (ends in `.gguf`). */
  groupName: string;
  shard: { index: number; count: number } | null;
  quant: string | null;
  projector: boolean;
}

const GGUF_EXT = /\.gguf$/i;
const SHARD_SUFFIX = /-(\d{5})-of-(\d{5})\.gguf$/i;
// A quantization label as llama.cpp's quantize and the big uploaders write them, standing alone
// between separators: Q4_K_M, Q4_0, Q4_0_4_4, IQ2_XXS, IQ4_NL, TQ1_0, UD-Q4_K_XL, MXFP4_MOE, F16, BF16, F32.
const QUANT_TOKEN = /(?:^|[-._])((?:UD-)?(?:I?Q[1-8](?:_[0-9A-Z]+)*|TQ[12]_0|MXFP4(?:_MOE)?|BF16|FP16|FP32|F16|F32))(?=$|[-._])/gi;

/** The last quantization label in a name, upper-cased, or null. */
export function quantLabel(name: string): string | null {
  let last: string | null = null;
  for (const match of name.matchAll(QUANT_TOKEN)) last = (match[1] as string).toUpperCase();
  if (last === 'FP16') return 'F16';
  if (last === 'FP32') return 'F32';
  return last;
}

/** Parses a `.gguf` path; null for anything else (including old `.gguf.part1of2` splits, which llama.cpp cannot load). */
export function parseGgufName(path: string): GgufName | null {
  if (!GGUF_EXT.test(path)) return null;
  const slash = path.lastIndexOf('/');
  const folder = slash >= 0 ? path.slice(0, slash) : '';
  const base = path.slice(slash + 1);
  const shardMatch = SHARD_SUFFIX.exec(base);
  let shard: GgufName['shard'] = null;
  let stem: string;
  if (shardMatch) {
    const index = Number(shardMatch[1]);
    const count = Number(shardMatch[2]);
    shard = index >= 1 && count >= 1 && index <= count ? { index, count } : null;
    stem = base.slice(0, shardMatch.index);
  } else {
    stem = base.replace(GGUF_EXT, '');
  }
  if (!shard && shardMatch) stem = base.replace(GGUF_EXT, '');
  const groupName = `${folder ? `${folder}/` : ''}${stem}.gguf`;
  const folderQuant = folder ? quantLabel(folder.slice(folder.lastIndexOf('/') + 1)) : null;
  return {
    path,
    stem,
    groupName,
    shard,
    quant: quantLabel(stem) ?? folderQuant,
    projector: /^mmproj/i.test(stem) || /[-._]mmproj([-._]|$)/i.test(stem),
  };
}

// whisper.cpp's model files as its own repos name them (`ggml-tiny.bin`, `ggml-large-v3-q5_0.bin`); the
// Core ML encoders beside them end in `.mlmodelc.zip` and are not models.
const WHISPER_FILE = /(?:^|\/)ggml-([^/]+)\.bin$/i;

/** The model name of a whisper.cpp ggml file path (`base.en` for `ggml-base.en.bin`); null for anything else. */
export function parseWhisperName(path: string): string | null {
  const match = WHISPER_FILE.exec(path);
  return match ? (match[1] as string) : null;
}

/** A model file Shoal can run: a GGUF (or a shard of one) or a whisper.cpp ggml file. */
export function isModelFile(path: string): boolean {
  return parseGgufName(path) !== null || parseWhisperName(path) !== null;
}

/** What to type into the hub's search for a pasted GGUF file name: its stem without shard suffix and quant label. */
export function searchTermForFilename(fileName: string): string {
  const base = fileName.slice(fileName.lastIndexOf('/') + 1);
  const parsed = parseGgufName(base);
  let stem = parsed ? parsed.stem : base;
  // Strip the trailing quant label (and an imatrix/UD marker before it), then trailing separators.
  const quant = parsed?.quant ?? quantLabel(stem);
  if (quant) {
    const at = stem.toUpperCase().lastIndexOf(quant);
    if (at > 0) stem = stem.slice(0, at);
  }
  stem = stem.replace(/[-._](i1|imat|imatrix|UD)?[-._]*$/i, '').replace(/[-._]+$/, '');
  return stem === '' ? base.replace(GGUF_EXT, '') : stem;
}

function sanitizeTag(text: string): string {
  const tag = text.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[-.]+|[-.]+$/g, '');
  return (tag === '' ? 'gguf' : tag).slice(0, 80);
}

/** Groups a repo's model files (GGUF and whisper.cpp ggml) into models; other files are ignored. Sorted by name. */
export function groupGgufFiles(files: readonly HubFile[]): GgufGroup[] {
  const byName = new Map<string, { parsed: GgufName; file: HubFile }[]>();
  const speech: GgufGroup[] = [];
  for (const file of files) {
    const whisper = parseWhisperName(file.path);
    if (whisper !== null) {
      speech.push({ name: file.path, quant: quantLabel(whisper), tag: '', files: [file], primaryPath: file.path, totalBytes: file.size, complete: true, projector: false, speech: true });
      continue;
    }
    const parsed = parseGgufName(file.path);
    if (!parsed) continue;
    const list = byName.get(parsed.groupName) ?? [];
    list.push({ parsed, file });
    byName.set(parsed.groupName, list);
  }
  const groups: GgufGroup[] = [];
  for (const [name, members] of byName) {
    members.sort((a, b) => (a.parsed.shard?.index ?? 0) - (b.parsed.shard?.index ?? 0));
    const first = members[0] as { parsed: GgufName; file: HubFile };
    const count = first.parsed.shard?.count ?? 1;
    const indexes = new Set(members.map((m) => m.parsed.shard?.index ?? 1));
    const sameCount = members.every((m) => (m.parsed.shard?.count ?? 1) === count);
    const complete = sameCount && members.length === count && indexes.size === count && [...indexes].every((i) => i >= 1 && i <= count);
    groups.push({
      name,
      quant: first.parsed.quant,
      tag: '',
      files: members.map((m) => m.file),
      primaryPath: first.file.path,
      totalBytes: members.reduce((sum, m) => sum + m.file.size, 0),
      complete,
      projector: first.parsed.projector,
      speech: false,
    });
  }
  groups.push(...speech);
  groups.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const quantCounts = new Map<string, number>();
  for (const g of groups) if (g.quant && !g.projector && !g.speech) quantCounts.set(g.quant, (quantCounts.get(g.quant) ?? 0) + 1);
  const used = new Set<string>();
  for (const g of groups) {
    // A whisper model is known by its name (`base.en`), which its quant label is only a part of.
    const whisper = g.speech ? parseWhisperName(g.primaryPath) : null;
    let tag: string;
    if (whisper !== null) tag = sanitizeTag(whisper);
    else {
      const stem = (parseGgufName(g.primaryPath) as GgufName).stem;
      tag = g.quant && !g.projector && quantCounts.get(g.quant) === 1 ? g.quant : sanitizeTag(g.name.replace(GGUF_EXT, '').replaceAll('/', '-') || stem);
    }
    for (let n = 2; used.has(tag); n += 1) tag = `${tag}-${n}`;
    used.add(tag);
    g.tag = tag;
  }
  return groups;
}

/**
 * The default pick, in this order (only complete GGUF models count, not projectors):
 *  1. the first present of DEFAULT_QUANT_ORDER (Q4_K_M, then Q4_0, Q5_K_M, Q8_0);
 *  2. else the smallest group quantized to 4 to 8 bits (IQ4_XS, Q6_K, UD-Q4_K_XL, ...);
 *  3. else the smallest group of 16 or 32 bits (BF16, F16, F32);
 *  4. else the first group by name (below 4 bits, or no recognisable label).
 * A repo of whisper models only: the first of DEFAULT_WHISPER_ORDER, else the smallest.
 */
export const DEFAULT_QUANT_ORDER = ['Q4_K_M', 'Q4_0', 'Q5_K_M', 'Q8_0'] as const;

/** Bits per weight named by a quant label (4 for Q4_K_M and IQ4_XS, 16 for BF16), null when unknown. */
export function quantBits(quant: string | null): number | null {
  if (!quant) return null;
  const q = quant.replace(/^UD-/, '');
  if (q === 'BF16' || q === 'F16') return 16;
  if (q === 'F32') return 32;
  if (q.startsWith('MXFP4')) return 4;
  const m = /^(?:I|T)?Q(\d)/.exec(q);
  return m ? Number(m[1]) : null;
}

function isGroupList(items: readonly (HubFile | GgufGroup)[]): items is readonly GgufGroup[] {
  return items.length > 0 && 'files' in (items[0] as object);
}

/** Picks the default model among a repo's files (or already-made groups); null when there is none. */
export function chooseDefaultQuant(items: readonly HubFile[] | readonly GgufGroup[]): GgufGroup | null {
  const groups = isGroupList(items) ? items : groupGgufFiles(items as readonly HubFile[]);
  const usable = groups.filter((g) => g.complete && !g.projector && !g.speech);
  if (usable.length === 0) return chooseWhisper(groups);
  for (const quant of DEFAULT_QUANT_ORDER) {
    const hit = usable.find((g) => g.quant === quant);
    if (hit) return hit;
  }
  const smallest = (list: GgufGroup[]): GgufGroup | null =>
    list.reduce<GgufGroup | null>((best, g) => (best === null || g.totalBytes < best.totalBytes ? g : best), null);
  const mid = smallest(usable.filter((g) => { const b = quantBits(g.quant); return b !== null && b >= 4 && b <= 8; }));
  if (mid) return mid;
  const wide = smallest(usable.filter((g) => (quantBits(g.quant) ?? 0) >= 16));
  if (wide) return wide;
  return usable[0] ?? null;
}

/** The whisper models a repo of them is added as by default: small enough for any machine, multilingual first. */
export const DEFAULT_WHISPER_ORDER = ['base', 'base.en', 'small', 'tiny'] as const;

function chooseWhisper(groups: readonly GgufGroup[]): GgufGroup | null {
  const speech = groups.filter((g) => g.speech);
  for (const name of DEFAULT_WHISPER_ORDER) {
    const hit = speech.find((g) => parseWhisperName(g.primaryPath) === name);
    if (hit) return hit;
  }
  return speech.reduce<GgufGroup | null>((best, g) => (best === null || g.totalBytes < best.totalBytes ? g : best), null);
}

/**
 * Finds the group a user named: its tag, quant label, group name or one of its file paths (a pasted
 * file name matches by base name), case-insensitively.
 */
export function findGroup(groups: readonly GgufGroup[], selector: string): GgufGroup | null {
  const s = selector.trim().toLowerCase();
  if (s === '') return null;
  const base = (p: string): string => p.slice(p.lastIndexOf('/') + 1).toLowerCase();
  return (
    groups.find((g) => g.tag.toLowerCase() === s) ??
    groups.find((g) => !g.projector && g.quant?.toLowerCase() === s) ??
    groups.find((g) => g.name.toLowerCase() === s || g.files.some((f) => f.path.toLowerCase() === s)) ??
    groups.find((g) => base(g.name) === base(s) || g.files.some((f) => base(f.path) === base(s))) ??
    null
  );
}

/** Projector precisions in the order `shoal models add` prefers them: full quality at half the bytes of F32 first. */
export const DEFAULT_PROJECTOR_ORDER = ['F16', 'BF16', 'Q8_0', 'F32'] as const;

/**
 * The multimodal projector a vision model of the repo loads: the one `selector` names (its precision,
 * or a name as findGroup reads it), else the first of DEFAULT_PROJECTOR_ORDER, else the smallest; null when the repo has
 * none (or the selector names none). Only complete projector groups count.
 */
export function chooseProjector(groups: readonly GgufGroup[], selector?: string): GgufGroup | null {
  const projectors = groups.filter((g) => g.projector && g.complete);
  if (selector !== undefined) return projectors.find((g) => g.quant !== null && g.quant.toLowerCase() === selector.trim().toLowerCase()) ?? findGroup(projectors, selector);
  for (const quant of DEFAULT_PROJECTOR_ORDER) {
    const hit = projectors.find((g) => g.quant === quant);
    if (hit) return hit;
  }
  return projectors.reduce<GgufGroup | null>((best, g) => (best === null || g.totalBytes < best.totalBytes ? g : best), null);
}
