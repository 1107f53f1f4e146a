import { defineScript } from '../../lua/script-loader';
import compareAndSet from './compare-and-set.lua';

/**
 * Lua scripts of the Redis health store (docs/architecture.md, "Provider health" and "Lua scripts"),
 * one `.lua` file each in this folder, whose header lists its KEYS, ARGV and reply.
 */
export const HEALTH_SCRIPTS = {
  compareAndSet: defineScript(
    'compare-and-set',
    { 'compare-and-set': compareAndSet },
    { numberOfKeys: 1, statuses: ['written', 'conflict'] },
  ),
};
