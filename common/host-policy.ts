// Which Host headers and browser Origins the service answers. A page on another site can make the
// browser talk to a loopback service: by DNS rebinding (its own name resolving to 127.0.0.1, so the
// request carries `Host: evil.example`) or by opening a WebSocket, which browsers allow across
// origins. The Host allow-list stops the first, the Origin check on WebSocket upgrades the second.
import { isIP } from 'node:net';
import { hostname } from 'node:os';

export interface HostPolicyOptions {
  /** The address the service is bound to (a name in it is allowed as a Host). */
  bind: string;
  /** More names the service may be reached by (a DNS name, a reverse proxy's); '*' allows any. */
  allowedHosts?: readonly string[];
  /** Browser origins besides the service's own that may open its WebSockets, e.g. https://app.foxglove.dev. */
  allowedOrigins?: readonly string[];
}

/** The host name of a Host header or URL host, lower-case, IPv6 without brackets; null when it is not one. */
function hostnameOf(host: string): string | null {
  try {
    const u = new URL(`http://${host}`);
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return null;
    return u.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  } catch {
    return null;
  }
}

/** Whether a listen host reaches only this machine (what every listener may bind without authentication). */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || /^::ffff:127\.\d+\.\d+\.\d+$/.test(h);
}

export class HostPolicy {
  private readonly names: Set<string>;
  private readonly any: boolean;
  private readonly origins: Set<string>;
  private readonly ownPorts = new Set<string>();

  constructor(o: HostPolicyOptions) {
    const given = o.allowedHosts ?? [];
    this.any = given.includes('*');
    this.names = new Set(['localhost', hostname().toLowerCase(), ...[o.bind, ...given.filter((h) => h !== '*')].map((h) => {
      const n = hostnameOf(h);
      if (n === null) throw new Error(`allowed host '${h}': not a host name or address`);
      return n;
    })]);
    this.origins = new Set((o.allowedOrigins ?? []).map((s) => {
      let u: URL;
      try {
        u = new URL(s);
      } catch {
        throw new Error(`allowed origin '${s}': not an origin (scheme://host[:port])`);
      }
      if (u.origin === 'null' || u.pathname.replace(/^\/$/, '') || u.search || u.hash) throw new Error(`allowed origin '${s}': not an origin (scheme://host[:port]), e.g. https://app.foxglove.dev`);
      return u.origin;
    }));
  }

  /**
   * True for a request without Host (not a browser), an IP address (a rebinding page has a name,
   * not our address), a loopback name, the bound host, this machine's name, or an allowed host.
   */
  hostAllowed(host: string | undefined): boolean {
    if (host === undefined || this.any) return true;
    const n = hostnameOf(host);
    if (n === null) return false;
    return isIP(n) !== 0 || n.endsWith('.localhost') || this.names.has(n);
  }

  /** The service's other listening ports (HTTP, Foxglove): its pages on one may open WebSockets on another. */
  addOwnPort(port: number): void {
    this.ownPorts.add(String(port));
  }

  /**
   * True without an Origin (not a browser), for an allowed origin, or for the service's own pages: the
   * same host name as the request's (an allowed Host) on the request's port or another of the service's.
   * A page of another machine or another local server is refused.
   */
  originAllowed(origin: string | undefined, host: string | undefined): boolean {
    if (origin === undefined) return true;
    let u: URL;
    let h: URL;
    try {
      u = new URL(origin);
      h = new URL(`http://${host}`);
    } catch {
      return false;
    }
    if (this.origins.has(u.origin)) return true;
    if (host === undefined || !this.hostAllowed(host) || (u.protocol !== 'http:' && u.protocol !== 'https:')) return false;
    return u.hostname === h.hostname && (u.port === h.port || this.ownPorts.has(u.port));
  }
}
