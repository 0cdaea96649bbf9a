/**
 * DrainState is how the process tells the HTTP layer that it is shutting down. The entry point
 * starts the drain on SIGTERM (see src/shutdown.ts); from then on /readyz answers 503
 * SHUTTING_DOWN, a readiness check already in progress answers so at once, and every response
 * closes its connection. Requests themselves are still served to the end.
 */
export class DrainState {
  readonly #started = Promise.withResolvers<void>();
  #draining = false;

  /** True once start() was called. */
  get draining(): boolean {
    return this.#draining;
  }

  /** Resolves when the drain starts, so work that waits can stop waiting. */
  get started(): Promise<void> {
    return this.#started.promise;
  }

  /** start marks the process as draining. Calling it again does nothing. */
  start(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#started.resolve();
  }
}
