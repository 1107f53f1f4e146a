export * from './redis-server';
export { waitUntil } from './wait-until';
