// The create benchmark through the real E2B SDK (bench/serve.py's `sdk` case runs it against its
// daemon): Sandbox.create(), then commands.run('echo x') until its first stdout byte, timed from
// before the create. `row` rounds one after another, then `together` at once (each timed from the
// common start). Prints one JSON line: {"row": [ms...], "together": [ms...], "together_wall": ms}.
// Every sandbox is killed after it is timed (not counted). The SDK comes from tests/e2e (pinned
// there; scripts/install-deps.sh installs it); E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY point
// it at the daemon, as in tests/e2e/harness.mjs.
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { performance } from 'node:perf_hooks'

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)))
const { Sandbox } = await import(pathToFileURL(join(ROOT, 'tests/e2e/node_modules/e2b/dist/index.mjs')).href)

const [row, together, warmup] = process.argv.slice(2).map((a) => parseInt(a, 10))
process.env.E2B_DOMAIN = 'hutch.invalid' // nothing the SDK builds from it reaches E2B
delete process.env.E2B_DEBUG

// One sandbox: its create and first output, timed from t0. Returns [ms, the sandbox].
async function one(t0) {
  const sbx = await Sandbox.create({ timeoutMs: 600_000 })
  let first = 0
  const r = await sbx.commands.run('echo x', {
    onStdout: () => {
      if (!first) first = performance.now()
    },
  })
  if (r.stdout !== 'x\n' || !first) throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  return [first - t0, sbx]
}

for (let i = 0; i < warmup; i++) await (await one(performance.now()))[1].kill()
const rowMs = []
for (let i = 0; i < row; i++) {
  const [ms, sbx] = await one(performance.now())
  rowMs.push(ms)
  await sbx.kill()
}
const t0 = performance.now()
const all = await Promise.all(Array.from({ length: together }, () => one(t0)))
const wall = performance.now() - t0
await Promise.all(all.map(([, sbx]) => sbx.kill()))
const togetherMs = all.map(([ms]) => ms)
console.log(JSON.stringify({ row: rowMs, together: togetherMs, together_wall: wall }))
