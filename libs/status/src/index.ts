export type { ResourceStatus, StatusSnapshot } from './snapshot/snapshot';
export { buildSnapshot, trackedProviderIds } from './snapshot/build-snapshot';
export { RESOURCE_METRICS, ResourceGauges } from './prometheus/resource-gauges';
export { registerConfigInfoGauge } from './prometheus/config-info-gauge';
