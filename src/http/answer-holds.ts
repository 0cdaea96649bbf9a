import { AsyncLocalStorage } from 'node:async_hooks';
import type { Middleware } from 'koa';
import { type AnswerBudget, type AnswerHold, answersOverloaded } from '../service/answer-budget.ts';
import { ApiError } from '../service/errors.ts';
import type { AppState } from './app-state.ts';
import type { Operation } from './operations/operation.ts';

// The operations' handlers get their request context from the registration, which knows nothing
// of holds: the hold reaches them through the async context of the request instead.
const current = new AsyncLocalStorage<AnswerHold>();

/** The hold of the request being handled, when its operation's answer holds rows (see holdAnswers). */
export function answerHold(): AnswerHold | undefined {
  return current.getStore();
}

/**
 * holdAnswers gives each request of an operation whose answer holds rows (`operation.answer`) its
 * hold on the shared answer budget, and gives back all it took once the response has been written
 * or the client has gone: on the response's 'close', which comes after an answer, a problem or an
 * abort alike. An answer that cannot end early (`whole`) first waits for its turn to read, before
 * its body is read; one refused for want of room (then, or before it is rendered) is a 503
 * OVERLOADED, counted as shed.
 */
export function holdAnswers(budget: AnswerBudget): (operation: Operation) => Array<Middleware<AppState>> {
  return (operation) => {
    if (operation.answer === undefined) return [];
    const waits = operation.answer === 'whole';
    const hold: Middleware<AppState> = async (ctx, next) => {
      const answer = budget.hold();
      if (ctx.res.destroyed) answer.release();
      else ctx.res.once('close', () => answer.release());
      try {
        if (waits && !(await answer.turn())) throw answersOverloaded();
        await current.run(answer, next);
      } catch (error) {
        // Another bound may have refused it first; and a caller that left was not refused.
        const refused = error instanceof ApiError && error.code === 'OVERLOADED' && ctx.state.shedBy === undefined;
        if (refused && !ctx.res.destroyed) ctx.state.shedBy = 'answer_bytes';
        throw error;
      }
    };
    return [hold];
  };
}
