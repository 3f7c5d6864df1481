/**
 * The API's refusals (RFC 9457 problem documents) as errors: `code` is the contract, the
 * class only groups the codes by their HTTP status (as the Python client's).
 */

import type { components } from "./schema.js";

export type Problem = components["schemas"]["Problem"];

/**
 * The service refused a request: `status` (HTTP), `code` (stable, for programs), `detail`
 * (for people) and the whole problem document as `body`. An answer that is no problem
 * document (a proxy's error page) gets the code `http_<status>`.
 */
export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly body: Record<string, unknown>,
  ) {
    super(`${status} ${code}: ${detail}`);
    this.name = new.target.name;
  }
}

/** 400: a malformed request (a bad `Last-Event-ID`, say). */
export class BadRequest extends ProblemError {}
/** 401: no token, or one the service does not know. */
export class Unauthorized extends ProblemError {}
/** 403: the token may not do this (`not_seated`, `watch_table` ...). */
export class Forbidden extends ProblemError {}
/** 404: no such match, table or ticket (or not the caller's). */
export class NotFound extends ProblemError {}
/** 409: the state changed (`version_conflict`, `table_full`, `ticket_waiting` ...). */
export class Conflict extends ProblemError {}
/** 422: well formed but refused (an illegal play, `already_seated` ...). */
export class Unprocessable extends ProblemError {}
/** 429: too many requests; retried by the client before it is thrown. */
export class RateLimited extends ProblemError {}
/** 503: the service cannot answer now; retried by the client before it is thrown. */
export class Unavailable extends ProblemError {}

const FAMILIES: Record<number, typeof ProblemError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  422: Unprocessable,
  429: RateLimited,
  503: Unavailable,
};

/** The error for an answer that is not a success, from its status and its body's text. */
export function problemOf(status: number, statusText: string, text: string): ProblemError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  let document: Record<string, unknown>;
  if (isRecord(body) && typeof body.code === "string") {
    document = body;
  } else {
    document = {
      status,
      code: `http_${status}`,
      detail: text.slice(0, 200) || statusText,
    };
  }
  const Family = FAMILIES[status] ?? ProblemError;
  return new Family(status, String(document.code), String(document.detail ?? ""), document);
}

/**
 * A request that still failed on the way (no connection, a dropped one, a timeout) after
 * the retries; `cause` is what `fetch` threw.
 */
export class TransportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransportError";
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
