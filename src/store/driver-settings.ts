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
