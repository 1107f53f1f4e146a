import { defineScript, type LuaSources } from '../../lua/script-loader';
import addLease from './includes/add-lease.lua';
import args from './includes/args.lua';
import budget from './includes/budget.lua';
import budgetKey from './includes/budget-key.lua';
import budgetSettle from './includes/budget-settle.lua';
import budgetWindow from './includes/budget-window.lua';
import clientCounts from './includes/client-counts.lua';
import dropLease from './includes/drop-lease.lua';
import dropWaiter from './includes/drop-waiter.lua';
import fairOrder from './includes/fair-order.lua';
import fairTags from './includes/fair-tags.lua';
import grant from './includes/grant.lua';
import nowMs from './includes/now-ms.lua';
import ownerOf from './includes/owner-of.lua';
import park from './includes/park.lua';
import promote from './includes/promote.lua';
import queueJob from './includes/queue-job.lua';
import rcall from './includes/rcall.lua';
import std from './includes/std.lua';
import tokens from './includes/tokens.lua';
import unwant from './includes/unwant.lua';
import writeJob from './includes/write-job.lua';
import admit from './admit.lua';
import budgets from './budgets.lua';
import configure from './configure.lua';
import counts from './counts.lua';
import leave from './leave.lua';
import poll from './poll.lua';
import prefill from './prefill.lua';
import release from './release.lua';
import renew from './renew.lua';
import settle from './settle.lua';
import sweep from './sweep.lua';

/** Every `.lua` file of this folder, by path without `.lua`. */
const SOURCES: LuaSources = {
  admit,
  budgets,
  configure,
  counts,
  leave,
  poll,
  prefill,
  release,
  renew,
  settle,
  sweep,
  'includes/add-lease': addLease,
  'includes/args': args,
  'includes/budget': budget,
  'includes/budget-key': budgetKey,
  'includes/budget-settle': budgetSettle,
  'includes/budget-window': budgetWindow,
  'includes/client-counts': clientCounts,
  'includes/drop-lease': dropLease,
  'includes/drop-waiter': dropWaiter,
  'includes/fair-order': fairOrder,
  'includes/fair-tags': fairTags,
  'includes/grant': grant,
  'includes/now-ms': nowMs,
  'includes/owner-of': ownerOf,
  'includes/park': park,
  'includes/promote': promote,
  'includes/queue-job': queueJob,
  'includes/rcall': rcall,
  'includes/std': std,
  'includes/tokens': tokens,
  'includes/unwant': unwant,
  'includes/write-job': writeJob,
};

const ONE_KEY = 1;

/**
 * Lua scripts of the Redis lease store (docs/architecture.md, "Lease protocol" and "Lua scripts"),
 * one `.lua` file each in this folder, whose header lists its KEYS, ARGV and reply. Every state
 * change that reads then writes is one script, so admission, release, promotion and sweeping are
 * atomic and cost one round trip. Every script takes KEYS[1] `<base>:seq` and ARGV[1] the tag base
 * `<prefix>:{<tag>}`, and builds its other keys from that base, as BullMQ's own scripts build job
 * keys, so every key a script touches shares the tag's slot; the read-only `counts` instead takes
 * every key it reads in KEYS (the tag's `clients` hash, then its providers' queue keys).
 *
 * Waiting requests and leases are BullMQ jobs in BullMQ's own layout (the `prioritized` sorted set,
 * in BullMQ's score layout, and the `active` list; one hash per job written by
 * `includes/write-job.lua`), so `Queue.getJobCounts()` reports exactly the `queued` and `in_flight`
 * that admission decides on; `redis-provider-queue.spec.ts` pins this against BullMQ. The order of
 * waiting jobs and the clients' counts and caps are decided in the same scripts (docs/architecture.md,
 * "Clients, priority and fair share").
 * No BullMQ worker ever runs on these queues: grants are made by these scripts.
 */
export const LEASE_SCRIPTS = {
  admit: defineScript('admit', SOURCES, {
    numberOfKeys: ONE_KEY,
    statuses: ['granted', 'queued', 'full', 'client_full', 'unconfigured', 'budget', 'budget_never'],
  }),
  budgets: defineScript('budgets', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['budgets'], allowOom: true }),
  // Read-only, so it runs over maxmemory too; KEYS[1] the clients hash, then every queue key it reads.
  counts: defineScript('counts', SOURCES, {
    numberOfKeys: ONE_KEY,
    variadicKeys: true,
    statuses: ['counts'],
    allowOom: true,
  }),
  release: defineScript('release', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['released', 'gone'], allowOom: true }),
  prefill: defineScript('prefill', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['prefilled', 'none'], allowOom: true }),
  leave: defineScript('leave', SOURCES, {
    numberOfKeys: ONE_KEY,
    statuses: ['left', 'granted', 'shed', 'gone'],
    allowOom: true,
  }),
  renew: defineScript('renew', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['renewed'], allowOom: true }),
  poll: defineScript('poll', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['polled'], allowOom: true }),
  sweep: defineScript('sweep', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['swept'], allowOom: true }),
  settle: defineScript('settle', SOURCES, {
    numberOfKeys: ONE_KEY,
    statuses: ['left', 'released', 'gone'],
    allowOom: true,
  }),
  configure: defineScript('configure', SOURCES, { numberOfKeys: ONE_KEY, statuses: ['configured', 'unconfigured'] }),
};
