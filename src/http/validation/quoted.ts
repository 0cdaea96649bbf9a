import { shorten } from '../../service/text.ts';

/** quoted is caller input, shortened (shorten, service/text.ts), in double quotes, for a problem's detail. */
export function quoted(text: string): string {
  return `"${shorten(text)}"`;
}
