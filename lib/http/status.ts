/**
 * BCMS's status names (purple-cheetah's `HTTPStatus`), for `errorHandler.occurred`. `NOT_FOUNT` is
 * spelt as BCMS spells it, so BCMS code ports unchanged; `NOT_FOUND` is the same status.
 *
 * @example
 * throw errorHandler.occurred(HTTPStatus.NOT_FOUNT, `Todo "${id}" does not exist.`);
 */
export enum HTTPStatus {
  OK = 200,
  BAD_REQUEST = 400,
  UNAUTHORIZED = 401,
  FORBIDDEN = 403,
  NOT_FOUNT = 404,
  // biome-ignore lint/suspicious/noDuplicateEnumValues: BCMS's misspelt NOT_FOUNT and the right spelling are the same status
  NOT_FOUND = 404,
  UNPROCESSABLE_ENTITY = 422,
  INTERNAL_SERVER_ERROR = 500,
  SERVICE_UNAVAILABLE = 503,
}
