// The service's errors: a stable code (server/schemas.ts ERROR_CODES) and a message naming the problem.
import { ERROR_CODES, type ErrorCode } from './schemas.js';

export class ApiError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
    this.statusCode = ERROR_CODES[code];
  }
}
