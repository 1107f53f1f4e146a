export { type PromSample, parsePrometheusText, sampleValue } from './prometheus-text';
