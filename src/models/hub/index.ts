export { search, resolveRepo, resolveFiles, parseHubReference, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, type HubSearchResult, type ResolvedRepo, type HubReference } from './client.js';
export { hubEndpoint, resolveHubOptions, checkRepoId, DEFAULT_HF_ENDPOINT, type HubOptions, type ResolvedHubOptions } from './endpoint.js';
export { chooseDefaultQuant, groupGgufFiles, findGroup, parseGgufName, quantLabel, quantBits, searchTermForFilename, DEFAULT_QUANT_ORDER, type GgufGroup, type GgufName, type HubFile } from './gguf-files.js';
export { ModelsError, isModelsError, MODELS_ERROR_CODE, type ModelsErrorReason } from './errors.js';
