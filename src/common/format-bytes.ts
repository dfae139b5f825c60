const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/**
 * A byte count as people read it: binary units (what memory, disks and GGUF sizes are quoted in) and
 * three significant digits, so sizes of one magnitude line up in a table: 0 -> "0 B",
 * 1536 -> "1.50 KiB", 12.3 MiB -> "12.3 MiB", 250 GiB -> "250 GiB". Negative counts (a shortfall)
 * keep their sign.
 */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  const magnitude = Math.abs(value);
  return `${value.toFixed(magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2)} ${UNITS[unit]}`;
}
