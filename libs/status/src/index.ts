export type {
  ClientStatus,
  ClientTokenBudgetStatus,
  PoolClientStatus,
  PoolStatus,
  ResourceStatus,
  StatusSnapshot,
} from './snapshot/snapshot';
export { buildSnapshot, trackedProviderIds } from './snapshot/build-snapshot';
export { buildFlowStatus } from './snapshot/flow-status';
export { budgetedClients, clientTokenBudgets } from './snapshot/client-budgets';
export { RESOURCE_METRICS, ResourceGauges } from './prometheus/resource-gauges';
export { registerConfigInfoGauge } from './prometheus/config-info-gauge';
