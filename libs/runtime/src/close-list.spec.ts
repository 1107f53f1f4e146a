import { CloseList } from './close-list';

describe('CloseList, the one list every way out of a process runs', () => {
  it('closes newest first, awaiting each step before the next', async () => {
    const list = new CloseList();
    const order: string[] = [];
    list.add('redis', () => order.push('redis'));
    list.add('queue', async () => {
      await new Promise((r) => setTimeout(r, 20));
      order.push('queue');
    });
    list.add('server', () => order.push('server'));
    expect(await list.closeAll()).toEqual(['server', 'queue', 'redis']);
    expect(order).toEqual(['server', 'queue', 'redis']);
  });

  it('runs every step even when one throws or rejects', async () => {
    const list = new CloseList();
    const closed: string[] = [];
    list.add('a', () => closed.push('a'));
    list.add('throws', () => {
      throw new Error('boom');
    });
    list.add('rejects', () => Promise.reject(new Error('boom')));
    expect(await list.closeAll()).toEqual(['rejects', 'throws', 'a']);
    expect(closed).toEqual(['a']);
  });

  it('runs each step once: a second way out finds nothing left to close', async () => {
    const list = new CloseList();
    let runs = 0;
    list.add('once', () => runs++);
    await Promise.all([list.closeAll(), list.closeAll()]);
    expect(await list.closeAll()).toEqual([]);
    expect(runs).toBe(1);
  });
});
