export { OllamaAdapter, ollamaV1Url } from './ollama-adapter';
