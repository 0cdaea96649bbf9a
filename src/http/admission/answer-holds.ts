import type { ServerResponse } from 'node:http';
import type { Middleware } from 'koa';
import { type AnswerBudget, type AnswerHold, isAnswerNotAdmitted } from '../../service/answer-budget.ts';
import type { AppState } from '../app-state.ts';
import type { Operation } from '../operations/operation.ts';
import { whenClosed } from './response-closed.ts';

/**
 * holdAnswers gives each request of an operation whose answer holds rows (`operation.holdsRows`) its
 * hold on the shared answer budget, and gives back all it took once the response has been written
 * or the client has gone: on the response's 'close', which comes after an answer, a problem or an
 * abort alike. An answer refused for want of room (a batchGet's, which waits to be admitted in the
 * service, before it reads and after) is a 503 OVERLOADED, counted as shed.
 */
export function holdAnswers(budget: AnswerBudget): (operation: Operation) => Array<Middleware<AppState>> {
  return (operation) => {
    if (operation.holdsRows !== true) return [];
    // Not async: this runs for every read of a row, and most never use their hold.
    const hold: Middleware<AppState> = (ctx, next) => {
      // The operation gets it in its request context (register.ts). Released when the response
      // closes, once the operation has used it: most reads of one row never do, and pay nothing for it.
      ctx.state.answer = budget.hold(releaseOnClose, ctx.res);
      return next().catch((error: unknown) => {
        // Another bound may have refused it first (a change feed's bounds on open feeds answer 503
        // too); and a caller that left was not refused.
        const refused = isAnswerNotAdmitted(error) && ctx.state.shedBy === undefined;
        if (refused && !ctx.res.destroyed) ctx.state.shedBy = 'answer_bytes';
        throw error;
      });
    };
    return [hold];
  };
}

/** Gives back what `hold` took when `res` closes (at once if it has). */
function releaseOnClose(hold: AnswerHold, res: ServerResponse): void {
  if (res.destroyed) hold.release();
  else whenClosed(res, () => hold.release());
}
