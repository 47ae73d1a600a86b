// The node checks' case runner (structured_output.mjs, tool_calls.mjs, zod_helpers.mjs): [name, async fn]
// cases run `slots` at a time, one per server slot, in list order. A case passes when fn resolves; a throw
// is its failure, named. Returns the cases run, those that passed and the failure lines.
export async function runCases(cases, slots) {
  let next = 0;
  let total = 0;
  let valid = 0;
  const failures = [];
  async function worker() {
    while (next < cases.length) {
      const [name, fn] = cases[next++];
      total++;
      try {
        await fn();
        valid++;
      } catch (e) {
        failures.push(`${name}: ${e.message}`);
      }
    }
  }
  await Promise.all(Array.from({ length: slots }, worker));
  return { total, valid, failures };
}
