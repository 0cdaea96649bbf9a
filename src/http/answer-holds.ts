import type { Middleware } from 'koa';
import type { AnswerBudget } from '../service/answer-budget.ts';
import { ApiError } from '../service/errors.ts';
import type { AppState } from './app-state.ts';
import type { Operation } from './operations/operation.ts';
import { whenClosed } from './response-closed.ts';

/**
 * holdAnswers gives each request of an operation whose answer holds rows (`operation.holdsRows`) its
 * hold on the shared answer budget, and gives back all it took once the response has been written
 * or the client has gone: on the response's 'close', which comes after an answer, a problem or an
 * abort alike. An answer refused for want of room (a batchGet's, which waits for its turns in the
 * service) is a 503 OVERLOADED, counted as shed.
 */
export function holdAnswers(budget: AnswerBudget): (operation: Operation) => Array<Middleware<AppState>> {
  return (operation) => {
    if (operation.holdsRows !== true) return [];
    const hold: Middleware<AppState> = async (ctx, next) => {
      const answer = budget.hold();
      if (ctx.res.destroyed) answer.release();
      else whenClosed(ctx.res, () => answer.release());
      try {
        // The operation gets it in its request context (register.ts).
        ctx.state.answer = answer;
        await next();
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
