/** The varint codec has moved to src/lib/varint.ts; this path stays for the drivers until they import it from there. */
export { readVarint, varint } from '../lib/varint.ts';
