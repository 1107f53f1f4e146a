export * from './snapshot/snapshot';
export * from './snapshot/build-snapshot';
export * from './snapshot/flow-status';
export * from './prometheus/resource-gauges';
export * from './prometheus/config-info-gauge';
