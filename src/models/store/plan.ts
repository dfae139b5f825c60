// Which files of a resolved hub repo a download fetches: pure over the repo's GGUF groups.

import type { ResolvedRepo } from '../hub/client.js';
import { ModelsError } from '../hub/errors.js';
import { chooseDefaultQuant, findGroup, type HubFile } from '../hub/gguf-files.js';

/**
 * What a download fetches: one GGUF group of a repo pinned to a revision, with the vision model's
 * projector file when its card names one (stored, verified, copied and evicted with the model).
 */
export interface DownloadPlan {
  /** `owner/name:<tag>` (see GgufGroup.tag). */
  modelId: string;
  repo: string;
  revision: string;
  group: string;
  primaryPath: string;
  files: HubFile[];
}

/** The repo's projector file `path` as plan files; a typed error that lists the projectors there when it has no such file. */
function projectorFiles(resolved: ResolvedRepo, path: string, where: string): HubFile[] {
  const group = resolved.groups.find((g) => g.projector && g.files.some((f) => f.path === path));
  if (!group || !group.complete) {
    const projectors = resolved.groups.filter((g) => g.projector).map((g) => g.primaryPath);
    throw new ModelsError(
      'NO_GGUF',
      `${where} has no ${group ? 'complete ' : ''}projector ${path}: ${projectors.length > 0 ? `it has ${projectors.join(', ')}; name one of them as the card's projector.file` : 'it has none; remove projector from the card to serve text only'}`,
    );
  }
  return group.files;
}

/**
 * Picks the model to download from a resolved repo; `selector` as PullRequest.quant, `projector` the
 * repo path of the projector file to fetch with it (a vision card's `projector.file`).
 */
export function planDownload(resolved: ResolvedRepo, selector?: string, projector?: string): DownloadPlan {
  const where = `${resolved.repo}@${resolved.revision.slice(0, 12)}`;
  if (resolved.groups.length === 0) {
    throw new ModelsError('NO_GGUF', `${resolved.repo} has no GGUF files at ${resolved.requestedRevision}: Shoal runs GGUF models (and whisper.cpp's ggml-*.bin for speech to text); look for a repo that offers them (shoal models search <name>)`);
  }
  const available = resolved.groups.filter((g) => !g.projector).map((g) => g.tag).join(', ');
  const group = selector !== undefined && selector !== '' ? findGroup(resolved.groups, selector) : chooseDefaultQuant(resolved.groups);
  if (!group) {
    throw new ModelsError('NO_GGUF', selector ? `${where} has no GGUF "${selector}": it has ${available}` : `${where} has no complete GGUF model: it has ${available}`);
  }
  if (!group.complete) {
    throw new ModelsError('NO_GGUF', `${group.name} in ${where} is split into shards and some are missing from the repo; pick another: ${available}`);
  }
  if (group.projector) {
    throw new ModelsError('NO_GGUF', `${group.name} in ${where} is a multimodal projector, not a model; pick one of ${available}`);
  }
  const files = projector === undefined ? group.files : [...group.files, ...projectorFiles(resolved, projector, where)];
  return { modelId: `${resolved.repo}:${group.tag}`, repo: resolved.repo, revision: resolved.revision, group: group.name, primaryPath: group.primaryPath, files };
}
