import { packBudgetCharge, packBudgetState, unpackBudgetCharge, unpackBudgetState } from './budget-hash';

// docs/architecture.md, "Token budgets" (Redis layout): the values the scripts pack with struct
// `<dddd` and `<dd`; lease-budget.spec.ts checks them against the scripts themselves.
describe('budget hash values', () => {
  it('packs a window state as four little-endian doubles, an absent bound as -1', () => {
    const packed = packBudgetState({ used: 900, reserved: 100, oldest: 29_433_000, newest: 29_433_055 });
    expect(packed).toHaveLength(32);
    expect([0, 8, 16, 24].map((at) => packed.readDoubleLE(at))).toEqual([900, 100, 29_433_000, 29_433_055]);
    expect(unpackBudgetState(packed)).toEqual({ used: 900, reserved: 100, oldest: 29_433_000, newest: 29_433_055 });
    const empty = packBudgetState({ used: 0, reserved: 0 });
    expect([16, 24].map((at) => empty.readDoubleLE(at))).toEqual([-1, -1]);
    expect(unpackBudgetState(empty)).toEqual({ used: 0, reserved: 0 });
  });

  it('keeps token counts past 32 bits exact', () => {
    const big = 2 ** 40 + 7;
    expect(unpackBudgetState(packBudgetState({ used: big, reserved: 3, oldest: 1, newest: 2 })).used).toBe(big);
    expect(unpackBudgetCharge(packBudgetCharge({ charged: big, reserved: big - 1 }))).toEqual({
      charged: big,
      reserved: big - 1,
    });
  });

  it('reads an absent field as empty and refuses a value of another layout', () => {
    expect(unpackBudgetState(null)).toEqual({ used: 0, reserved: 0 });
    expect(unpackBudgetCharge(null)).toEqual({ charged: 0, reserved: 0 });
    expect(() => unpackBudgetState(Buffer.from('1300'))).toThrow('a budget window state is 32 bytes, this value has 4');
    expect(() => unpackBudgetCharge(Buffer.from('900'))).toThrow(
      'a budget bucket charge is 16 bytes, this value has 3',
    );
  });
});
