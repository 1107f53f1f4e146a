export * from './prometheus-text';
