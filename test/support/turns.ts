import { Turns } from '../../src/lib/turns.ts';

/**
 * Counts the turns of the event loop (one setImmediate callback each) from its making until
 * stop(): how often work in between let other work run. 0 when it never did.
 */
export class TurnCounter {
  #turns = 0;
  #counting = true;

  constructor() {
    const tick = () => {
      if (!this.#counting) return;
      this.#turns += 1;
      setImmediate(tick);
    };
    setImmediate(tick);
  }

  /** The turns counted so far. */
  get turns(): number {
    return this.#turns;
  }

  /** Stops counting, and answers the turns counted. */
  stop(): number {
    this.#counting = false;
    return this.#turns;
  }
}

/** Turns whose every slice has had its time: work paced by it yields after each piece. */
export class EveryTurnDue extends Turns {
  override due(): boolean {
    return true;
  }
}
