export * from './redis-server';
export { waitUntil } from './wait-until';
export { seedLeases } from './seed-leases';
export { startRedisCluster, type TestRedisCluster } from './redis-cluster';
