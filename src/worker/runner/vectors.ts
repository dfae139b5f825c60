/** Scales a vector to length 1; a zero vector stays as it is. */
export function unitLength(vector: readonly number[]): number[] {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return norm === 0 ? [...vector] : vector.map((x) => x / norm);
}
