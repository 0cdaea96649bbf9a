/** Most characters of a caller's input repeated in a detail message: enough to recognise it, never a flood (a 4 KiB key). */
export const QUOTED_CHARS = 100;

/** shorten cuts caller input to QUOTED_CHARS, marking the cut with an ellipsis. */
export function shorten(text: string): string {
  return text.length <= QUOTED_CHARS ? text : `${text.slice(0, QUOTED_CHARS)}…`;
}
