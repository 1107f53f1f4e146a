export type { ClientStatus, PoolClientStatus, PoolStatus, ResourceStatus, StatusSnapshot } from './snapshot/snapshot';
export { buildSnapshot, trackedProviderIds } from './snapshot/build-snapshot';
export { buildFlowStatus } from './snapshot/flow-status';
export { RESOURCE_METRICS, ResourceGauges } from './prometheus/resource-gauges';
export { registerConfigInfoGauge } from './prometheus/config-info-gauge';
