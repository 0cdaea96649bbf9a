/** Caller input quoted in a detail message, cut so that a 4 KiB key does not flood the answer. */
export function shorten(text: string): string {
  return text.length <= 100 ? text : `${text.slice(0, 100)}…`;
}
