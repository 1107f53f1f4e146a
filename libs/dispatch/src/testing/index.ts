export { type TestRedis, startRedis, uniquePrefix, scanKeys, spawnRedis, freePort } from './redis-server';
export { waitForOutput, waitUntil } from './wait-until';
export { rawExchange, type RawExchange } from './raw-http';
export { seedLeases } from './seed-leases';
export { proxyClusterMasters, startRedisCluster, type TestRedisCluster } from './redis-cluster';
export { startTcpProxy, type TcpProxy } from './tcp-proxy';
export { startRedisSentinel, type TestRedisSentinel } from './redis-sentinel';
export { startLeaseLoad, type LeaseLoad } from './lease-load';
export { commandsSinceReset, scriptCallsSinceReset } from './command-count';
