import type { ApiKeys } from './auth.js';
import type { Dispatcher } from './dispatch.js';

/** What every API family plugin receives from the server that registers it. */
export interface FamilyOptions {
  dispatcher: Dispatcher;
  apiKeys: ApiKeys;
}
