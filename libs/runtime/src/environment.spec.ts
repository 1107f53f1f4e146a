import { EnvironmentError, exporterEnvironmentSchema, gatewayEnvironmentSchema, readEnvironment } from './environment';

describe('readEnvironment', () => {
  it('fills the defaults when nothing is set, and treats an empty value as unset', () => {
    expect(readEnvironment(gatewayEnvironmentSchema, {})).toEqual({
      LOG_LEVEL: 'info',
      IOP_SHUTDOWN_GRACE_MS: 30000,
      OTEL_BSP_SCHEDULE_DELAY: undefined,
    });
    expect(readEnvironment(gatewayEnvironmentSchema, { LOG_LEVEL: '', IOP_SHUTDOWN_GRACE_MS: '' })).toMatchObject({
      LOG_LEVEL: 'info',
      IOP_SHUTDOWN_GRACE_MS: 30000,
    });
    expect(readEnvironment(exporterEnvironmentSchema, { PATH: '/bin' })).toEqual({ LOG_LEVEL: 'info' });
  });

  it('takes good values', () => {
    expect(
      readEnvironment(gatewayEnvironmentSchema, {
        LOG_LEVEL: 'warn',
        IOP_SHUTDOWN_GRACE_MS: '0',
        OTEL_BSP_SCHEDULE_DELAY: '1000',
      }),
    ).toEqual({
      LOG_LEVEL: 'warn',
      IOP_SHUTDOWN_GRACE_MS: 0,
      OTEL_BSP_SCHEDULE_DELAY: 1000,
    });
  });

  it.each(['abc', '-1', '1.5', '1e3', ' 30', '30s'])(
    'refuses IOP_SHUTDOWN_GRACE_MS=%j, naming it, its value and what is expected',
    (value) => {
      expect(() => readEnvironment(gatewayEnvironmentSchema, { IOP_SHUTDOWN_GRACE_MS: value })).toThrow(
        new EnvironmentError(
          `environment variable IOP_SHUTDOWN_GRACE_MS=${JSON.stringify(value)}: expected a whole number of milliseconds, 0 or more (e.g. 30000)`,
        ),
      );
    },
  );

  it('lists every bad variable, one per line', () => {
    let message = '';
    try {
      readEnvironment(gatewayEnvironmentSchema, { LOG_LEVEL: 'verbose', OTEL_BSP_SCHEDULE_DELAY: 'soon' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.split('\n')).toEqual([
      'environment variable LOG_LEVEL="verbose": expected one of fatal, error, warn, info, debug, trace, silent',
      'environment variable OTEL_BSP_SCHEDULE_DELAY="soon": expected a whole number of milliseconds, 0 or more (e.g. 30000)',
    ]);
  });
});
