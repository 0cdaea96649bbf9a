import type { ErrorCode } from '../service/errors.ts';
import type { Operation } from './operations/operation.ts';
import { V1_COMMON_ERRORS, V1_OPERATIONS } from './v1/operations.ts';
import { V2_COMMON_ERRORS, V2_OPERATIONS } from './v2/operations.ts';

/** Every operation of the API, v1's then v2's: what the router serves and the document describes. */
export const API_OPERATIONS: readonly Operation[] = [...V1_OPERATIONS, ...V2_OPERATIONS];

/** The codes every operation of each API version may answer with. */
export const COMMON_ERRORS: Readonly<Record<Operation['tag'], readonly ErrorCode[]>> = { v1: V1_COMMON_ERRORS, v2: V2_COMMON_ERRORS };
