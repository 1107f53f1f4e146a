export { type TestRedis, startRedis, uniquePrefix, scanKeys, spawnRedis, freePort } from './redis-server';
export { waitUntil } from './wait-until';
export { seedLeases } from './seed-leases';
export { type TestRedisCluster, startRedisCluster } from './redis-cluster';
