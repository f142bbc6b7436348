// The warm pool of base through the SDK (HUTCH_POOL=1; src/serve/pool.h): the first create makes
// one ahead, the next create takes it (its log says claimed) and the sandbox is the create's in
// everything the SDK sees: metadata, env vars, timeout, start time, list; the pool's successor is
// in no list; the daemon's stop kills it (the harness checks that no record is left).
import { Sandbox } from 'e2b'
import { start, done, test, assert, eq, sleep, waitFor, api } from './harness.mjs'

await start({ env: { HUTCH_POOL: '1' } })
const tag = `pool-${process.pid}`
let first, taken

await test('the first create of base: a sandbox of its own', async () => {
  first = await Sandbox.create({ metadata: { suite: tag, n: '1' }, timeoutMs: 120_000 })
  const r = await api('GET', `/sandboxes/${first.sandboxId}/logs`)
  assert(!JSON.stringify(r.json).includes('"claimed"'), 'its log has no claim')
})

await test('the next create takes the pool sandbox, made the creator\'s', async () => {
  await sleep(1_000) // the pool's one is made 30 ms after the first create and runs by now
  const t0 = Date.now()
  taken = await Sandbox.create({ metadata: { suite: tag, n: '2' }, envs: { HELLO: 'pool' }, timeoutMs: 60_000 })
  const logs = await waitFor(async () => {
    const r = await api('GET', `/sandboxes/${taken.sandboxId}/logs`)
    return JSON.stringify(r.json).includes('"claimed"') ? r.json : null
  }, 3_000)
  assert(logs, 'its log says claimed')
  const info = await taken.getInfo()
  eq(info.metadata, { suite: tag, n: '2' }, 'metadata: the create\'s only')
  eq(info.templateId, 'base', 'templateId')
  assert(Math.abs(info.startedAt.getTime() - t0) < 5_000, `startedAt is the create's: ${info.startedAt.toISOString()}`)
  const left = info.endAt.getTime() - t0
  assert(left > 45_000 && left <= 75_000, `endAt is the create's timeout from now: ${left} ms`)
  const r = await taken.commands.run('echo $HELLO; id -un; ls -A /tmp | wc -l')
  eq(r.stdout, 'pool\nuser\n0\n', 'a command sees the create\'s env var, runs as user, /tmp empty')
})

await test('the list shows both and nothing of the pool', async () => {
  const all = await Sandbox.list().nextItems()
  eq(all.map((s) => s.sandboxId).sort(), [first.sandboxId, taken.sandboxId].sort(), 'all listed ids')
})

await test('kill both', async () => {
  await Promise.all([first.kill(), taken.kill()])
  const all = await Sandbox.list().nextItems()
  eq(all.length, 0, 'none listed')
})

await done()
