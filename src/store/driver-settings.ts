import { accessSync, constants } from 'node:fs';
import Joi from 'joi';

/** Joi custom rule for a setting naming a file: it must be readable now, or the message names it. */
export function readableFile(path: string, helpers: Joi.CustomHelpers): string | Joi.ErrorReport {
  try {
    accessSync(path, constants.R_OK);
    return path;
  } catch {
    return helpers.message({ custom: `{{#label}} file "${path}" cannot be read` });
  }
}

/**
 * A Google Cloud project ID, which goes into resource names (projects/{id}/...), so nothing that
 * could break the path. Legacy domain-scoped IDs ("example.com:my-project") are allowed.
 */
export const projectId = Joi.string()
  .trim()
  .pattern(/^[a-z][-a-z0-9.:]{2,98}[a-z0-9]$/)
  .required()
  .messages({ 'string.pattern.base': '{{#label}} "{{#value}}" is not a valid project ID' });

/** host:port of a backend's emulator (Bigtable's, Spanner's): when set, no credentials or metadata server are consulted. */
export const emulatorHost = Joi.string()
  .trim()
  .pattern(/^[A-Za-z0-9.-]+:([1-9][0-9]{0,4})$/)
  .messages({ 'string.pattern.base': '{{#label}} must be host:port, got "{{#value}}"' });

/**
 * A service account key file, which must be readable, beside an `emulatorHost` setting: against
 * the emulator no credentials are read at all, so the file is neither checked nor kept.
 */
export const credentialsFile = Joi.when('emulatorHost', {
  is: Joi.exist(),
  then: Joi.any().strip(),
  otherwise: Joi.string().trim().custom(readableFile),
});
