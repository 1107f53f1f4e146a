export * from './route/route';
export * from './route/resolve-route';
export * from './route/admission';
export * from './queue/admission-error';
export * from './queue/provider-queue';
export * from './queue/memory-queue';
