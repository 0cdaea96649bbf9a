/**
 * The names under which requests carry row keys (marked with carriesRowKeys in the schemas):
 * traces record query parameters of these names as REDACTED. Read from the schemas v1/schemas.ts
 * and v2/schemas.ts export, which load nothing but joi, so that tracing can start with them before
 * the modules it instruments are loaded.
 */
import Joi from 'joi';
import { rowKeyNames } from './schemas.ts';
import * as v1 from '../v1/schemas.ts';
import * as v2 from '../v2/schemas.ts';

const exported: unknown[] = [...Object.values(v1), ...Object.values(v2)];

export const ROW_KEY_NAMES: readonly string[] = [
  ...new Set(exported.filter((value): value is Joi.Schema => Joi.isSchema(value)).flatMap((schema) => rowKeyNames(schema))),
].sort();
