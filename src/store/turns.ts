/** Turns has moved to src/lib/turns.ts; this path stays for the drivers until they import it from there. */
export { Turns, nextTurn } from '../lib/turns.ts';
