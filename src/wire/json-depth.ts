/**
 * Deepest nesting of arrays and objects a request body may have (the body itself is level 1).
 * Node's JSON.stringify recurses, so a value thousands of levels deep cannot be handed to a runner
 * process; msgpack refuses more than 100 levels on the routed path (its encoder's default), and a
 * run frame adds two levels around the body's content. 64 leaves room for tool schemas about thirty
 * properties deep while keeping both paths well inside what they can carry.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * The nesting depth of a JSON text, counted without parsing it (so a hostile body costs one linear
 * scan), stopping as soon as it passes `limit`. Brackets inside strings do not count.
 */
export function jsonDepthExceeds(text: string, limit: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i += 1;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) {
      inString = true;
    } else if (ch === 0x7b || ch === 0x5b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (ch === 0x7d || ch === 0x5d) {
      depth -= 1;
    }
  }
  return false;
}
