import { MemoryProviderQueue } from './memory-queue';
import { describeProviderQueueContract } from './provider-queue.contract';

describeProviderQueueContract('memory', async () => new MemoryProviderQueue());
