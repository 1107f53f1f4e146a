/**
 * When each pool provider last sent a first byte to any request of this gateway process
 * (`performance.now()`, ms), so a first-byte timeout can be weighed against what the provider did
 * meanwhile (`weighFirstByteTimeout`, README "Provider health"). In-process: each replica weighs by
 * the answers it saw itself. One entry per provider id, never more.
 */
export class FirstByteClock {
  private readonly last = new Map<string, number>();

  /** Notes a first byte from `providerId` now. */
  mark(providerId: string, at: number = performance.now()): void {
    this.last.set(providerId, at);
  }

  /** When `providerId` last sent a first byte, or undefined when never (since this process started). */
  lastFirstByte(providerId: string): number | undefined {
    return this.last.get(providerId);
  }
}
