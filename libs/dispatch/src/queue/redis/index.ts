export * from './redis-provider-queue';
export * from './redis-queue-options';
