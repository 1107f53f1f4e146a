/** The local fleet's ports (README "A real fleet on one machine"). */
export interface FleetPorts {
  /** HAProxy's port for clients. */
  port: number;
  /** The status exporter's port: dashboard, /status, /metrics. */
  exporterPort: number;
  /** HAProxy's stats page. */
  statsPort: number;
}

/** Each port: its flag, the environment variable read when the flag is absent, and the default. */
const PORTS = [
  ['port', 'port', 'FLEET_PORT', 8080],
  ['exporterPort', 'exporter-port', 'FLEET_EXPORTER_PORT', 9464],
  ['statsPort', 'stats-port', 'FLEET_STATS_PORT', 8404],
] as const;

/**
 * The fleet's ports: each from its flag, else its environment variable (`FLEET_PORT`,
 * `FLEET_EXPORTER_PORT`, `FLEET_STATS_PORT`), else its default (8080, 9464, 8404).
 * @throws Error naming the flag or the variable when a value is not a port number 1-65535.
 */
export function fleetPorts(
  flags: Partial<Record<'port' | 'exporter-port' | 'stats-port', string>>,
  env: Record<string, string | undefined>,
): FleetPorts {
  const ports = { port: 0, exporterPort: 0, statsPort: 0 };
  for (const [key, flag, variable, fallback] of PORTS) {
    const fromFlag = flags[flag];
    const fromEnv = env[variable];
    const text = fromFlag ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : String(fallback));
    const n = /^\d{1,5}$/.test(text.trim()) ? Number(text) : NaN;
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw new Error(`${fromFlag !== undefined ? `--${flag}` : variable} must be a port number 1-65535, got ${text}`);
    ports[key] = n;
  }
  return ports;
}
