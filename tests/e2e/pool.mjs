// The warm pool of base through the SDK (HUTCH_POOL=1; src/serve/pool.h): the first create makes
// one ahead, the next create takes it (its log says claimed) and the sandbox is the create's in
// everything the SDK sees: metadata, env vars, timeout, start time, list; the pool's successor is
// in no list; the daemon's stop kills it (the harness checks that no record is left). The pool of
// code-interpreter-v1 the same way, its python kernel started before the claim and given the
// create's env vars then (PROTOCOL.md, "environment").
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
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

let ciFirst, ciTaken
await test('code-interpreter-v1: the pool sandbox\'s python and javascript kernels ran before the claim and have its env vars', async () => {
  ciFirst = await CodeSandbox.create({ metadata: { suite: tag, n: '3' }, timeoutMs: 120_000 })
  await sleep(3_000) // the pool's one: made 30 ms after, its kernel forked from the host's zygote
  const t0 = Date.now()
  ciTaken = await CodeSandbox.create({
    metadata: { suite: tag, n: '4' },
    envs: { HELLO: 'ci-pool', PYTHONPATH: '/home/user/lib' },
    timeoutMs: 60_000,
  })
  const r = await api('GET', `/sandboxes/${ciTaken.sandboxId}/logs`)
  assert(JSON.stringify(r.json).includes('"claimed"'), 'its log says claimed')
  await ciTaken.files.write('/home/user/lib/pool_probe_mod.py', 'WHERE = "user lib"\n')
  const sinceCreate = (Date.now() - t0) / 1000
  const x = await ciTaken.runCode([
    'import os',
    'ticks = os.sysconf("SC_CLK_TCK")',
    'started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks',
    'age = float(open("/proc/uptime").read().split()[0]) - started',
    'import pool_probe_mod',
    'child = os.popen("echo $HELLO").read().strip()',
    '(os.environ.get("HELLO"), child, pool_probe_mod.WHERE, round(age, 2))',
  ].join('\n'))
  eq(x.error, undefined, 'no error')
  const m = /^\('ci-pool', 'ci-pool', 'user lib', ([0-9.]+)\)$/.exec(x.text ?? '')
  assert(m, `os.environ, a child's env and PYTHONPATH have the create's: ${x.text}`)
  assert(Number(m[1]) > sinceCreate + 1, `the kernel started before the create (${m[1]} s old, the create ${sinceCreate.toFixed(2)} s ago)`)
  const js = await ciTaken.runCode('[process.env.HELLO, Math.round(process.uptime())]', { language: 'js' })
  const jm = /^\[ 'ci-pool', ([0-9]+) \]$/.exec(js.text ?? '')
  assert(jm, `javascript: the create's env var: ${js.text}`)
  assert(Number(jm[1]) >= Math.round(sinceCreate + 1), `javascript: the kernel started before the create (${jm[1]} s old)`)
  const y = await ciTaken.runCode('import os; os.environ.get("HELLO")', { envs: { HELLO: 'once' } })
  eq(y.text, 'once', 'an execution\'s env_vars over it')
  const z = await ciTaken.runCode('os.environ.get("HELLO")')
  eq(z.text, 'ci-pool', 'and the create\'s again after it')
})

await test('the list shows all and nothing of the pools', async () => {
  const all = await Sandbox.list().nextItems()
  eq(all.map((s) => s.sandboxId).sort(),
    [first.sandboxId, taken.sandboxId, ciFirst.sandboxId, ciTaken.sandboxId].sort(), 'all listed ids')
})

await test('kill all', async () => {
  await Promise.all([first.kill(), taken.kill(), ciFirst.kill(), ciTaken.kill()])
  const all = await Sandbox.list().nextItems()
  eq(all.length, 0, 'none listed')
})

await done()
