import { BcmsHttpError } from '../http/errors';
import { compileBodyCheck, type BodyCheckResult } from '../schema/body';
import type { BcmsFunction } from './types';

type BodyCheck = (body: unknown) => BodyCheckResult | Promise<BodyCheckResult>;

const checks = new WeakMap<BcmsFunction, BodyCheck | null>();

/**
 * The check of a function's `config.bodySchema`, compiled once (null without one). A schema that
 * cannot be checked throws here, naming the function: at load, where its author sees it.
 */
export function functionBodyCheck(definition: BcmsFunction): BodyCheck | null {
  let check = checks.get(definition);
  if (check === undefined) {
    const schema = definition.config.bodySchema;
    try {
      check = schema === undefined ? null : compileBodyCheck(schema);
    } catch (error) {
      throw new TypeError(`function "${definition.config.name}": config.bodySchema: ${(error as Error).message}`);
    }
    checks.set(definition, check);
  }
  return check;
}

/**
 * The body the handler gets: as it came, or, with a `bodySchema`, the schema's output (its
 * defaults and coercions); a body that does not fit is a 400 BODY_INVALID naming the field.
 */
export async function checkedFunctionBody(definition: BcmsFunction, body: unknown): Promise<unknown> {
  const check = functionBodyCheck(definition);
  if (check === null) return body;
  const result = await check(body);
  if (!result.ok) throw new BcmsHttpError('BODY_INVALID', result.message);
  return result.value;
}
