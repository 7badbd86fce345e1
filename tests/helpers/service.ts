import type { Service } from '../../server/service.js';

/** A request for `app.inject`: GET unless told, a JSON body as `payload`. */
export interface InjectRequest {
  method?: 'GET' | 'POST' | 'PUT';
  url: string;
  headers?: Record<string, string>;
  payload?: unknown;
}

/** `inject` into the service `service()` returns at call time, since a test file starts its service in beforeAll. */
export function injector(service: () => Service) {
  return (o: InjectRequest) => service().app.inject({ method: o.method ?? 'GET', url: o.url, headers: o.headers, payload: o.payload as string });
}
