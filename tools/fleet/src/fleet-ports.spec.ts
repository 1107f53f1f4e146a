import { fleetPorts } from './fleet-ports';

describe('npm run fleet: ports from flags, else the environment, else the defaults', () => {
  it('defaults to 8080, 9464 and 8404', () => {
    expect(fleetPorts({}, {})).toEqual({ port: 8080, exporterPort: 9464, statsPort: 8404 });
  });

  it('reads FLEET_PORT, FLEET_EXPORTER_PORT and FLEET_STATS_PORT; a flag wins over its variable', () => {
    const env = { FLEET_PORT: '18080', FLEET_EXPORTER_PORT: '19464', FLEET_STATS_PORT: '18404' };
    expect(fleetPorts({}, env)).toEqual({ port: 18080, exporterPort: 19464, statsPort: 18404 });
    expect(fleetPorts({ port: '28080' }, env)).toEqual({ port: 28080, exporterPort: 19464, statsPort: 18404 });
    expect(fleetPorts({}, { FLEET_PORT: '' })).toMatchObject({ port: 8080 });
  });

  it.each([
    [{ port: '0' }, {}, '--port'],
    [{ 'stats-port': '70000' }, {}, '--stats-port'],
    [{}, { FLEET_EXPORTER_PORT: 'abc' }, 'FLEET_EXPORTER_PORT'],
    [{}, { FLEET_PORT: '1e3' }, 'FLEET_PORT'],
  ])('refuses %p %p, naming %s', (flags, env, named) => {
    expect(() => fleetPorts(flags, env)).toThrow(named);
  });
});
